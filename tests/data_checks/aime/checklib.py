"""Shared pieces of check.py (see its docstring): constants, helpers and the registries the per-split
check modules fill."""

import math
import os
from fractions import Fraction

# the shipped data, inside the package (these checks stay out of it)
HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "tsrl", "tasks", "data", "aime")
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
    signs = {cross(vertices[i], vertices[(i + 1) % n], vertices[(i + 2) % n]) > 0 for i in range(n)}
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
    b = [x2**2 + y2**2 - x1**2 - y1**2, x3**2 + y3**2 - x1**2 - y1**2]
    p, q = solve_linear(A, b)
    d = [(p - x) ** 2 + (q - y) ** 2 for x, y in (P1, P2, P3)]
    assert d[0] == d[1] == d[2]
    return p, q, d[0]
