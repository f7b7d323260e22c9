"""Independent verification of every answer in train.jsonl / eval.jsonl.

Each problem id has its own function that recomputes the answer from scratch,
by brute-force enumeration where feasible and otherwise with exact integer /
Fraction arithmetic (no floating point anywhere). Every function also names a
fingerprint substring that has to occur in the problem text, so the functions
cannot silently drift out of sync with the data file.

Run:  python tsrl/tasks/data/aime/check.py
"""

import itertools
import json
import math
import os
import sys
from fractions import Fraction

HERE = os.path.dirname(os.path.abspath(__file__))
TOPICS = {"number theory", "algebra", "combinatorics", "geometry", "probability"}
CHECKS = {}


def check(pid, fingerprint):
    def deco(fn):
        assert pid not in CHECKS, pid
        CHECKS[pid] = (fingerprint, fn)
        return fn
    return deco


# ---------------------------------------------------------------- helpers
def mn(fr):
    fr = Fraction(fr)
    assert fr > 0
    return fr.numerator + fr.denominator


def divisors(n):
    return [d for d in range(1, n + 1) if n % d == 0]


def is_square(n):
    return n >= 0 and math.isqrt(n) ** 2 == n


def exact_sqrt(fr):
    """Square root of a non-negative Fraction that must be a rational square."""
    fr = Fraction(fr)
    a, b = math.isqrt(fr.numerator), math.isqrt(fr.denominator)
    assert a * a == fr.numerator and b * b == fr.denominator, fr
    return Fraction(a, b)


def solve_linear(A, b):
    """Gauss-Jordan elimination over Fractions; A must be square and nonsingular."""
    n = len(A)
    M = [[Fraction(x) for x in row] + [Fraction(v)] for row, v in zip(A, b)]
    for c in range(n):
        p = next(r for r in range(c, n) if M[r][c] != 0)
        M[c], M[p] = M[p], M[c]
        piv = M[c][c]
        M[c] = [x / piv for x in M[c]]
        for r in range(n):
            if r != c and M[r][c] != 0:
                f = M[r][c]
                M[r] = [x - f * y for x, y in zip(M[r], M[c])]
    return [M[r][n] for r in range(n)]


def cross(o, a, b):
    return (a[0] - o[0]) * (b[1] - o[1]) - (a[1] - o[1]) * (b[0] - o[0])


def pick_area(vertices):
    """Area of a convex lattice polygon via brute-force lattice counting + Pick."""
    n = len(vertices)
    signs = {cross(vertices[i], vertices[(i + 1) % n], vertices[(i + 2) % n]) > 0
             for i in range(n)}
    assert len(signs) == 1, "polygon must be strictly convex"
    orient = 1 if signs.pop() else -1
    xs = [v[0] for v in vertices]
    ys = [v[1] for v in vertices]
    interior = boundary = 0
    for x in range(min(xs), max(xs) + 1):
        for y in range(min(ys), max(ys) + 1):
            cs = [orient * cross(vertices[i], vertices[(i + 1) % n], (x, y)) for i in range(n)]
            if all(c > 0 for c in cs):
                interior += 1
            elif all(c >= 0 for c in cs):
                boundary += 1
    return Fraction(interior) + Fraction(boundary, 2) - 1


def circumcenter(P1, P2, P3):
    (x1, y1), (x2, y2), (x3, y3) = P1, P2, P3
    A = [[2 * (x2 - x1), 2 * (y2 - y1)], [2 * (x3 - x1), 2 * (y3 - y1)]]
    b = [x2 ** 2 + y2 ** 2 - x1 ** 2 - y1 ** 2, x3 ** 2 + y3 ** 2 - x1 ** 2 - y1 ** 2]
    p, q = solve_linear(A, b)
    d = [(p - x) ** 2 + (q - y) ** 2 for x, y in (P1, P2, P3)]
    assert d[0] == d[1] == d[2]
    return p, q, d[0]


# ---------------------------------------------------------------- train
@check("train-001", "divisible by $6$ or by $15$ but not by $10$")
def train_001():
    return sum(1 for n in range(1, 1000) if (n % 6 == 0 or n % 15 == 0) and n % 10 != 0)


@check("train-002", "x^2-7x+3=0")
def train_002():
    # roots (7 +- sqrt37)/2 as exact elements a + b*sqrt(37) of Q(sqrt 37)
    def mul(u, v):
        return (u[0] * v[0] + 37 * u[1] * v[1], u[0] * v[1] + u[1] * v[0])
    r = (Fraction(7, 2), Fraction(1, 2))
    s = (Fraction(7, 2), Fraction(-1, 2))
    for z in (r, s):
        z2 = mul(z, z)
        assert (z2[0] - 7 * z[0] + 3, z2[1] - 7 * z[1]) == (0, 0)
    r3, s3 = mul(mul(r, r), r), mul(mul(s, s), s)
    tot = (r3[0] + s3[0], r3[1] + s3[1])
    assert tot[1] == 0 and tot[0].denominator == 1
    return int(tot[0])


@check("train-003", "no two consecutive integers")
def train_003():
    return sum(1 for c in itertools.combinations(range(1, 13), 4)
               if all(c[i + 1] - c[i] > 1 for i in range(3)))


@check("train-004", "all three cards have the same suit")
def train_004():
    deck = [(rank, suit) for rank in range(13) for suit in range(4)]
    good = tot = 0
    for a, b, c in itertools.combinations(deck, 3):
        tot += 1
        good += a[1] == b[1] == c[1]
    return mn(Fraction(good, tot))


@check("train-005", r"x^2+y^2\le 100")
def train_005():
    return sum(1 for x in range(-11, 12) for y in range(-11, 12) if x * x + y * y <= 100)


@check("train-006", "10^{50}-37")
def train_006():
    return sum(int(ch) for ch in str(10 ** 50 - 37))


@check("train-007", "arithmetic sequence")
def train_007():
    # S_n = n*a + n(n-1)/2 * d
    a, d = solve_linear([[20, 190], [40, 780]], [500, 1800])
    terms = [a + k * d for k in range(40)]
    assert sum(terms[:20]) == 500 and sum(terms) == 1800
    t30 = terms[29]
    assert t30.denominator == 1
    return int(t30)


@check("train-008", "BANANA")
def train_008():
    return len(set(itertools.permutations("BANANA")))


@check("train-009", "at least $8$ of them land heads")
def train_009():
    good = sum(1 for t in itertools.product((0, 1), repeat=10) if sum(t) >= 8)
    return mn(Fraction(good, 2 ** 10))


@check("train-010", "legs of lengths $20$ and $21$")
def train_010():
    c2 = 20 ** 2 + 21 ** 2
    assert is_square(c2)
    c = math.isqrt(c2)
    area = Fraction(20 * 21, 2)
    r = area / Fraction(20 + 21 + c, 2)  # r = Area / semiperimeter
    assert r.denominator == 1
    return int(r)


@check("train-011", r"2^4\cdot 3^3\cdot 5^2")
def train_011():
    return sum(1 for d in divisors(2 ** 4 * 3 ** 3 * 5 ** 2) if is_square(d))


@check("train-012", r"\left\lfloor\sqrt{k}\right\rfloor")
def train_012():
    return sum(math.isqrt(k) for k in range(1, 101))


@check("train-013", "strictly increasing from left to right")
def train_013():
    cnt = 0
    for n in range(1, 1000):
        s = str(n)
        if all(s[i] < s[i + 1] for i in range(len(s) - 1)):
            cnt += 1
    return cnt


@check("train-014", "divisor of $720$")
def train_014():
    ds = divisors(720)
    return mn(Fraction(sum(1 for d in ds if is_square(d)), len(ds)))


@check("train-015", "$(1,2)$, $(7,3)$, $(9,10)$, $(4,13)$, and $(0,9)$")
def train_015():
    A = pick_area([(1, 2), (7, 3), (9, 10), (4, 13), (0, 9)])
    assert A.denominator == 1
    return int(A)


@check("train-016", "ends in at least $25$ zeros")
def train_016():
    n = 1
    while True:
        s = str(math.factorial(n))
        if len(s) - len(s.rstrip("0")) >= 25:
            return n
        n += 1


@check("train-017", "x^4-10x^3+35x^2-50x+24=0")
def train_017():
    # Newton's identities for monic x^4 - e1 x^3 + e2 x^2 - e3 x + e4
    e1, e2, e3, e4 = 10, 35, 50, 24
    p1 = e1
    p2 = e1 * p1 - 2 * e2
    p3 = e1 * p2 - e2 * p1 + 3 * e3
    p4 = e1 * p3 - e2 * p2 + e3 * p1 - 4 * e4
    return p4


@check("train-018", r"$2\times 10$ rectangle")
def train_018():
    rows, cols = 2, 10
    filled = [[False] * cols for _ in range(rows)]

    def count():
        for c in range(cols):
            for r in range(rows):
                if not filled[r][c]:
                    total = 0
                    for dr, dc in ((0, 1), (1, 0)):
                        r2, c2 = r + dr, c + dc
                        if r2 < rows and c2 < cols and not filled[r2][c2]:
                            filled[r][c] = filled[r2][c2] = True
                            total += count()
                            filled[r][c] = filled[r2][c2] = False
                    return total
        return 1

    return count()


@check("train-019", "$1$ and $2$ are next to each other")
def train_019():
    good = tot = 0
    for p in itertools.permutations(range(1, 9)):
        tot += 1
        good += abs(p.index(1) - p.index(2)) == 1
    return mn(Fraction(good, tot))


@check("train-020", "a leg of length $24$")
def train_020():
    # (c-b)(c+b)=576 forces c+b <= 576, so b < 576
    tris = set()
    for b in range(1, 600):
        c2 = 24 * 24 + b * b
        if is_square(c2):
            tris.add(tuple(sorted((24, b, math.isqrt(c2)))))
    return len(tris)


@check("train-021", "1^3+2^3+3^3")
def train_021():
    return sum(k ** 3 for k in range(1, 101)) % 1000


@check("train-022", r"\frac{1}{k(k+1)}")
def train_022():
    return mn(sum(Fraction(1, k * (k + 1)) for k in range(1, 100)))


@check("train-023", "leave no number in its original position")
def train_023():
    return sum(1 for p in itertools.permutations(range(6)) if all(p[i] != i for i in range(6)))


@check("train-024", "product is a multiple of $3$")
def train_024():
    pairs = list(itertools.combinations(range(1, 21), 2))
    return mn(Fraction(sum(1 for a, b in pairs if (a * b) % 3 == 0), len(pairs)))


@check("train-025", "5x-12y+3=0")
def train_025():
    P = (Fraction(10), Fraction(20))
    # foot of the perpendicular: P - t*(5,-12) with 5x-12y+3=0
    t = (5 * P[0] - 12 * P[1] + 3) / (5 * 5 + 12 * 12)
    F = (P[0] - 5 * t, P[1] + 12 * t)
    assert 5 * F[0] - 12 * F[1] + 3 == 0
    d = exact_sqrt((P[0] - F[0]) ** 2 + (P[1] - F[1]) ** 2)
    return mn(d)


@check("train-026", "n^2+n+1$ divisible by $7$")
def train_026():
    return sum(1 for n in range(1, 1000) if (n * n + n + 1) % 7 == 0)


@check("train-027", "a_{n+1}=a_n+2n")
def train_027():
    a = 1
    for n in range(1, 30):
        a = a + 2 * n
    return a  # this is a_30


@check("train-028", "no two consecutive $1$s")
def train_028():
    return sum(1 for t in itertools.product("01", repeat=12) if "11" not in "".join(t))


@check("train-029", "exactly two of them are red")
def train_029():
    bag = ["R"] * 5 + ["B"] * 3
    combos = list(itertools.combinations(range(8), 3))
    good = sum(1 for c in combos if sum(bag[i] == "R" for i in c) == 2)
    return mn(Fraction(good, len(combos)))


@check("train-030", "x^2+y^2=625")
def train_030():
    return sum(1 for x in range(-26, 27) for y in range(-26, 27) if x * x + y * y == 625)


@check("train-031", "exactly three positive divisors")
def train_031():
    return sum(1 for n in range(1, 501) if len(divisors(n)) == 3)


@check("train-032", r"\log_2 x+\log_4 x+\log_8 x=\frac{11}{2}")
def train_032():
    # log2 x + log4 x + log8 x = log2(x^(1+1/2+1/3)) = log2(x^(11/6)); the equation is
    # x^(11/6) = 2^(11/2), i.e. x^11 = 2^33 for x > 0 (strictly monotone, so unique).
    sols = [x for x in range(1, 1000) if x ** 11 == 2 ** 33]
    assert len(sols) == 1
    return sols[0]


@check("train-033", "regular $12$-gon")
def train_033():
    # vertices (2cos(30k deg), 2sin(30k deg)); coordinates are exact a + b*sqrt(3) as (a, b)
    C = [(2, 0), (0, 1), (1, 0), (0, 0), (-1, 0), (0, -1), (-2, 0), (0, -1), (-1, 0), (0, 0), (1, 0), (0, 1)]
    pts = [(C[k], C[(k - 3) % 12]) for k in range(12)]  # sin(t) = cos(t - 90 deg)

    def sub(u, v):
        return (u[0] - v[0], u[1] - v[1])

    def mul(u, v):
        return (u[0] * v[0] + 3 * u[1] * v[1], u[0] * v[1] + u[1] * v[0])

    def add(u, v):
        return (u[0] + v[0], u[1] + v[1])

    def dot(P, Q, R):  # (P-Q).(R-Q)
        return add(mul(sub(P[0], Q[0]), sub(R[0], Q[0])), mul(sub(P[1], Q[1]), sub(R[1], Q[1])))

    for x, y in pts:  # every vertex is on the circle of radius 2
        assert add(mul(x, x), mul(y, y)) == (4, 0)
    cnt = 0
    for i, j, k in itertools.combinations(range(12), 3):
        P, Q, R = pts[i], pts[j], pts[k]
        if (0, 0) in (dot(Q, P, R), dot(P, Q, R), dot(P, R, Q)):
            cnt += 1
    return cnt


@check("train-034", "largest number shown is exactly $5$")
def train_034():
    good = sum(1 for t in itertools.product(range(1, 7), repeat=4) if max(t) == 5)
    return mn(Fraction(good, 6 ** 4))


@check("train-035", "Square $ABCD$ has side length $12$")
def train_035():
    A, B, C, D = (0, 0), (12, 0), (12, 12), (0, 12)
    E = ((B[0] + C[0]) // 2, (B[1] + C[1]) // 2)
    F = (C[0] - 4, C[1])  # on CD, 4 units from C toward D
    assert (E, F) == ((12, 6), (8, 12))
    area = pick_area([A, E, F])
    assert area.denominator == 1
    return int(area)


@check("train-036", "11^{10}-1")
def train_036():
    return (11 ** 10 - 1) % 1000


@check("train-037", "3x+5y=200")
def train_037():
    best = None
    for x in range(1, 200):
        if (200 - 3 * x) > 0 and (200 - 3 * x) % 5 == 0:
            y = (200 - 3 * x) // 5
            best = x * y if best is None else max(best, x * y)
    return best


@check("train-038", "sum of elements divisible by $5$")
def train_038():
    cnt = 0
    for r in range(11):
        for c in itertools.combinations(range(1, 11), r):
            cnt += sum(c) % 5 == 0
    return cnt


@check("train-039", "its digits sum to $9$")
def train_039():
    good = sum(1 for n in range(100, 1000) if sum(map(int, str(n))) == 9)
    return mn(Fraction(good, 900))


@check("train-040", r"x,y\in\{0,1,2,3\}")
def train_040():
    pts = [(x, y) for x in range(4) for y in range(4)]
    return sum(1 for a, b, c in itertools.combinations(pts, 3) if cross(a, b, c) != 0)


@check("train-041", "1^{99}+2^{99}")
def train_041():
    return sum(k ** 99 for k in range(1, 100)) % 100


@check("train-042", "(1+i)^n")
def train_042():
    cnt = 0
    z = (1, 0)
    for n in range(1, 101):
        z = (z[0] - z[1], z[0] + z[1])  # multiply by (1+i)
        cnt += z[1] == 0
    return cnt


@check("train-043", "$3$ identical rooks")
def train_043():
    cells = [(r, c) for r in range(5) for c in range(5)]
    return sum(1 for t in itertools.combinations(cells, 3)
               if len({p[0] for p in t}) == 3 and len({p[1] for p in t}) == 3)


@check("train-044", r"x,y\in\{0,1,2,3,4\}")
def train_044():
    pts = [(x, y) for x in range(5) for y in range(5)]

    def d2(p, q):
        return (p[0] - q[0]) ** 2 + (p[1] - q[1]) ** 2

    cnt = 0
    for quad in itertools.combinations(pts, 4):
        ds = sorted(d2(p, q) for p, q in itertools.combinations(quad, 2))
        if ds[0] > 0 and ds[0] == ds[1] == ds[2] == ds[3] and ds[4] == ds[5] == 2 * ds[0]:
            cnt += 1
    return cnt


@check("train-045", "2^n-1$ is divisible by $125$")
def train_045():
    n = 1
    while (2 ** n - 1) % 125 != 0:
        n += 1
    return n


@check("train-046", "f(f(x))=x")
def train_046():
    return sum(1 for f in itertools.product(range(5), repeat=5) if all(f[f[x]] == x for x in range(5)))


@check("train-047", "divisors of $240$")
def train_047():
    return sum(divisors(240))


@check("train-048", "remainder $5$ when divided by $11$")
def train_048():
    n = 1
    while not (n % 3 == 2 and n % 5 == 3 and n % 7 == 4 and n % 11 == 5):
        n += 1
    return n


# ---------------------------------------------------------------- eval
@check("eval-001", "3^{2024}")
def eval_001():
    r = 1
    for _ in range(2024):  # plain repeated multiplication, no pow shortcut
        r = (r * 3) % 1000
    return r


@check("eval-002", "monic cubic polynomial")
def eval_002():
    # P(x) = x^3 + b x^2 + c x + d
    A = [[x * x, x, 1] for x in (1, 2, 3)]
    rhs = [2 - 1, 4 - 8, 6 - 27]
    b, c, d = solve_linear(A, rhs)
    val = 1000 + b * 100 + c * 10 + d
    assert val.denominator == 1
    return int(val)


@check("eval-003", "do not pass through the point $(2,3)$")
def eval_003():
    N = 6
    ways = [[0] * (N + 1) for _ in range(N + 1)]
    for x in range(N + 1):
        for y in range(N + 1):
            if (x, y) == (2, 3):
                ways[x][y] = 0
            elif (x, y) == (0, 0):
                ways[x][y] = 1
            else:
                ways[x][y] = (ways[x - 1][y] if x else 0) + (ways[x][y - 1] if y else 0)
    return ways[N][N]


@check("eval-004", "sum of the two numbers is prime")
def eval_004():
    def prime(n):
        return n > 1 and all(n % d for d in range(2, n))
    good = sum(1 for a in range(1, 7) for b in range(1, 7) if prime(a + b))
    return mn(Fraction(good, 36))


@check("eval-005", "$(0,0)$, $(24,0)$, and $(0,18)$")
def eval_005():
    # strictly inside: x > 0, y > 0, x/24 + y/18 < 1  <=>  18x + 24y < 432
    return sum(1 for x in range(25) for y in range(19) if x > 0 and y > 0 and 18 * x + 24 * y < 432)


@check("eval-006", r"\frac{1}{x}+\frac{1}{y}=\frac{1}{12}")
def eval_006():
    # 1/x + 1/y = 1/12  <=>  12(x + y) = xy ; any solution has 12 < x, y <= 156, search far beyond
    return sum(1 for x in range(1, 1001) for y in range(1, 1001) if 12 * (x + y) == x * y)


@check("eval-007", "f(x)+2f(1-x)=3x^2")
def eval_007():
    # unknowns u=f(10), v=f(-9):  x=10: u + 2v = 300 ; x=-9: v + 2u = 243
    u, v = solve_linear([[1, 2], [2, 1]], [3 * 10 ** 2, 3 * (-9) ** 2])
    assert u.denominator == 1
    return int(u)


@check("eval-008", "a+b+c+d=20")
def eval_008():
    return sum(1 for t in itertools.product(range(1, 9), repeat=4) if sum(t) == 20)


@check("eval-009", "expected number of distinct values")
def eval_009():
    outcomes = list(itertools.product(range(1, 7), repeat=3))
    return mn(Fraction(sum(len(set(t)) for t in outcomes), len(outcomes)))


@check("eval-010", "side lengths $13$, $14$, and $15$")
def eval_010():
    a, b, c = 13, 14, 15
    # place B=(0,0), C=(14,0), A=(x,y) with AB=13, AC=15
    x = Fraction(a * a - c * c + b * b, 2 * b)
    y = exact_sqrt(a * a - x * x)
    A, B, C = (x, y), (Fraction(0), Fraction(0)), (Fraction(b), Fraction(0))
    assert (A[0] - C[0]) ** 2 + (A[1] - C[1]) ** 2 == c * c
    _, _, R2 = circumcenter(A, B, C)
    return mn(exact_sqrt(R2))


@check("eval-011", "n^2+28n+7")
def eval_011():
    # (n+14)^2 - m^2 = 189 forces n + 14 <= 95; search far beyond that
    return sum(n for n in range(1, 20000) if is_square(n * n + 28 * n + 7))


@check("eval-012", "x^2-kx+2k=0")
def eval_012():
    ks = []
    for k in range(-5000, 5001):
        D = k * k - 8 * k
        if is_square(D) and (k + math.isqrt(D)) % 2 == 0:
            r, s = (k + math.isqrt(D)) // 2, (k - math.isqrt(D)) // 2
            assert r * r - k * r + 2 * k == 0 and s * s - k * s + 2 * k == 0
            ks.append(k)
    return sum(ks)


@check("eval-013", "Each face of a cube is painted one of $3$ colors")
def eval_013():
    # faces 0:+x 1:-x 2:+y 3:-y 4:+z 5:-z ; perm[i] = where face i goes
    rz = (2, 3, 1, 0, 4, 5)  # +x->+y, -x->-y, +y->-x, -y->+x
    rx = (0, 1, 4, 5, 3, 2)  # +y->+z, -y->-z, +z->-y, -z->+y
    group = {tuple(range(6))}
    frontier = list(group)
    while frontier:
        g = frontier.pop()
        for h in (rz, rx):
            gh = tuple(h[g[i]] for i in range(6))
            if gh not in group:
                group.add(gh)
                frontier.append(gh)
    assert len(group) == 24
    seen = set()
    for col in itertools.product(range(3), repeat=6):
        canon = min(tuple(col[g.index(i)] for i in range(6)) for g in group)
        seen.add(canon)
    return len(seen)


@check("eval-014", "lands exactly on $7$")
def eval_014():
    # 7 jumps always carry the frog past 7, so the first 7 jumps decide the event
    good = 0
    for jumps in itertools.product((1, 2), repeat=7):
        pos, hit = 0, False
        for j in jumps:
            pos += j
            hit = hit or pos == 7
        good += hit
    return mn(Fraction(good, 2 ** 7))


@check("eval-015", "$(0,0)$, $(14,0)$, and $(5,12)$")
def eval_015():
    p, q, _ = circumcenter((0, 0), (14, 0), (5, 12))
    v = 8 * (p + q)
    assert v.denominator == 1
    return int(v)


@check("eval-016", "n^3-n$ is divisible by $1000$")
def eval_016():
    return sum(1 for n in range(1, 1001) if (n ** 3 - n) % 1000 == 0)


# ---------------------------------------------------------------- driver
def load(split):
    with open(os.path.join(HERE, f"{split}.jsonl"), encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def main():
    failures = 0
    seen_ids = set()
    for split, n in (("train", 48), ("eval", 16)):
        rows = load(split)
        assert len(rows) == n, (split, len(rows))
        assert [r["id"] for r in rows] == [f"{split}-{i:03d}" for i in range(1, n + 1)]
        for r in rows:
            assert set(r) == {"id", "problem", "answer", "topic", "solution"}, r["id"]
            assert type(r["answer"]) is int and 0 <= r["answer"] <= 999, r["id"]
            assert r["topic"] in TOPICS, r["id"]
            assert r["problem"].strip() and r["solution"].strip(), r["id"]
            seen_ids.add(r["id"])
            fingerprint, fn = CHECKS[r["id"]]
            assert fingerprint in r["problem"], (r["id"], "fingerprint mismatch")
            got = fn()
            ok = got == r["answer"]
            failures += not ok
            print(f"{r['id']}  file={r['answer']:>4}  computed={got!s:>4}  {'OK' if ok else 'MISMATCH'}")
    assert seen_ids == set(CHECKS), "check functions and data ids differ"
    if failures:
        print(f"FAILED: {failures} mismatches")
        sys.exit(1)
    print(f"all {len(seen_ids)} answers verified")


if __name__ == "__main__":
    main()
