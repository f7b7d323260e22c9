"""The train split's checks for check.py: one function per id, registered in checklib."""

import itertools
import math
from fractions import Fraction

from checklib import check, cross, divisors, exact_sqrt, is_square, mn, pick_area, solve_linear


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
    return sum(1 for c in itertools.combinations(range(1, 13), 4) if all(c[i + 1] - c[i] > 1 for i in range(3)))


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
    return sum(int(ch) for ch in str(10**50 - 37))


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
    return mn(Fraction(good, 2**10))


@check("train-010", "legs of lengths $20$ and $21$")
def train_010():
    c2 = 20**2 + 21**2
    assert is_square(c2)
    c = math.isqrt(c2)
    area = Fraction(20 * 21, 2)
    r = area / Fraction(20 + 21 + c, 2)  # r = Area / semiperimeter
    assert r.denominator == 1
    return int(r)


@check("train-011", r"2^4\cdot 3^3\cdot 5^2")
def train_011():
    return sum(1 for d in divisors(2**4 * 3**3 * 5**2) if is_square(d))


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
    return sum(k**3 for k in range(1, 101)) % 1000


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
    sols = [x for x in range(1, 1000) if x**11 == 2**33]
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
    return mn(Fraction(good, 6**4))


@check("train-035", "Square $ABCD$ has side length $12$")
def train_035():
    A, B, C, _D = (0, 0), (12, 0), (12, 12), (0, 12)
    E = ((B[0] + C[0]) // 2, (B[1] + C[1]) // 2)
    F = (C[0] - 4, C[1])  # on CD, 4 units from C toward D
    assert (E, F) == ((12, 6), (8, 12))
    area = pick_area([A, E, F])
    assert area.denominator == 1
    return int(area)


@check("train-036", "11^{10}-1")
def train_036():
    return (11**10 - 1) % 1000


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
    return sum(k**99 for k in range(1, 100)) % 100


@check("train-042", "(1+i)^n")
def train_042():
    cnt = 0
    z = (1, 0)
    for _ in range(1, 101):
        z = (z[0] - z[1], z[0] + z[1])  # multiply by (1+i)
        cnt += z[1] == 0
    return cnt


@check("train-043", "$3$ identical rooks")
def train_043():
    cells = [(r, c) for r in range(5) for c in range(5)]
    return sum(
        1 for t in itertools.combinations(cells, 3) if len({p[0] for p in t}) == 3 and len({p[1] for p in t}) == 3
    )


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
    while (2**n - 1) % 125 != 0:
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
