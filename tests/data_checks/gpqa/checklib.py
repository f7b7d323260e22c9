"""Shared pieces of check.py (see its docstring): constants, helpers and the registries the per-split
check modules fill."""

import math
import os
import re
from fractions import Fraction

# the shipped data, inside the package (these checks stay out of it)
HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "tsrl", "tasks", "data", "gpqa")
DOMAINS = {"physics", "chemistry", "biology"}

# CODATA 2018 exact / recommended values (SI)
h = 6.62607015e-34
c = 299792458.0
e = 1.602176634e-19
m_e = 9.1093837015e-31
R = 8.314462618
R_ATM = 0.082057366  # L atm / (mol K)
F = 96485.33212
k_C = 8.9875517923e9
mu0 = 4e-7 * math.pi
# standard atomic weights
AW = {"H": 1.008, "C": 12.011, "O": 15.999}

CALC = {}  # id -> (fingerprint, fn)
CONCEPT = {}  # id -> (fingerprint, expected correct text, reason)
ABS_TOL = {}  # id -> absolute tolerance (for log-scale quantities)


def calc(pid, fingerprint, abs_tol=None):
    def deco(fn):
        assert pid not in CALC and pid not in CONCEPT, pid
        CALC[pid] = (fingerprint, fn)
        if abs_tol is not None:
            ABS_TOL[pid] = abs_tol
        return fn

    return deco


def concept(pid, fingerprint, expected, reason):
    assert pid not in CALC and pid not in CONCEPT, pid
    CONCEPT[pid] = (fingerprint, expected, reason)


NUM = re.compile(r"([-+]?\d+(?:\.\d+)?)(?:\s*×\s*10\^([-+]?\d+))?")
FRAC = re.compile(r"^\s*([-+]?\d+)\s*/\s*(\d+)\b")


def parse(choice):
    """Leading numeric value of a choice as an exact Fraction."""
    s = choice.replace("−", "-")
    s = re.sub(r"(?<=\d),(?=\d{3})", "", s)
    m = FRAC.match(s)
    if m:
        return Fraction(int(m.group(1)), int(m.group(2)))
    m = NUM.search(s)
    assert m, f"no number in choice {choice!r}"
    val = Fraction(m.group(1))
    if m.group(2):
        val *= Fraction(10) ** int(m.group(2))
    return val
