"""The eval split's checks for check.py: one function per id, registered in checklib."""

import itertools
import math
from fractions import Fraction

from checklib import check, circumcenter, exact_sqrt, is_square, mn, solve_linear


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
    u, v = solve_linear([[1, 2], [2, 1]], [3 * 10**2, 3 * (-9) ** 2])
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
    return mn(Fraction(good, 2**7))


@check("eval-015", "$(0,0)$, $(14,0)$, and $(5,12)$")
def eval_015():
    p, q, _ = circumcenter((0, 0), (14, 0), (5, 12))
    v = 8 * (p + q)
    assert v.denominator == 1
    return int(v)


@check("eval-016", "n^3-n$ is divisible by $1000$")
def eval_016():
    return sum(1 for n in range(1, 1001) if (n**3 - n) % 1000 == 0)
