"""The eval split's checks for check.py: one function per id, registered in checklib."""

import itertools
import math
from fractions import Fraction

from checklib import F, R, calc, concept


# ================================================================== eval
@calc("eval-001", "proton (rest energy 938.3 MeV)")
def eval_001():
    gamma = 1 / math.sqrt(1 - 0.600**2)
    return (gamma - 1) * 938.3


@calc("eval-002", "0.010 M aqueous solution of acetic acid", abs_tol=0.01)
def eval_002():
    Ka, C0 = 1.8e-5, 0.010
    x = (-Ka + math.sqrt(Ka * Ka + 4 * Ka * C0)) / 2  # x^2 / (C0 - x) = Ka
    assert abs(x * x / (C0 - x) - Ka) < 1e-12
    return -math.log10(x)


@calc("eval-003", "1 in 400 individuals")
def eval_003():
    q2 = Fraction(1, 400)
    q = Fraction(math.isqrt(q2.numerator), math.isqrt(q2.denominator))
    assert q * q == q2
    return 2 * (1 - q) * q


@calc("eval-004", "root-mean-square speed of N2")
def eval_004():
    return math.sqrt(3 * R * 300 / 0.0280)


@calc("eval-005", "Zn(s) | Zn²⁺(1.0 M) || Cu²⁺(0.010 M)", abs_tol=0.01)
def eval_005():
    n, T = 2, 298.15
    Q = 1.0 / 0.010
    return 1.10 - R * T / (n * F) * math.log(Q)


@calc("eval-006", "AaBbCc × AaBbCc")
def eval_006():
    gametes = list(itertools.product("Aa", "Bb", "Cc"))
    hits = total = 0
    for g1, g2 in itertools.product(gametes, repeat=2):
        total += 1
        dominant = sum(1 for x, y in zip(g1, g2) if x.isupper() or y.isupper())
        hits += dominant == 2
    return Fraction(hits, total)


@calc("eval-007", "circular orbit 400 km above")
def eval_007():
    GM = 3.986e14
    r = (6371 + 400) * 1e3
    return 2 * math.pi * math.sqrt(r**3 / GM) / 60  # minutes


@calc("eval-008", "activation energy of 50.0 kJ/mol")
def eval_008():
    return math.exp(50.0e3 / R * (1 / 300 - 1 / 310))


@calc("eval-009", "equilibrium potential for K⁺ at 37 °C")
def eval_009():
    T = 273.15 + 37
    return R * T / (1 * F) * math.log(5.0 / 140) * 1000  # mV


@calc("eval-010", "carbon-14 activity")
def eval_010():
    lam = math.log(2) / 5730
    return math.log(1 / 0.200) / lam


concept("eval-011", "2,3-dibromobutane", "3", "(2R,3R), (2S,3S) and the meso (2R,3S) form.")


@calc("eval-012", "ABO allele frequencies")
def eval_012():
    freq = {"A": Fraction(3, 10), "B": Fraction(1, 10), "i": Fraction(6, 10)}
    typeA = Fraction(0)
    for a1, a2 in itertools.product(freq, repeat=2):
        pheno = "".join(sorted({a1, a2} - {"i"})) or "O"
        if pheno == "A":
            typeA += freq[a1] * freq[a2]
    return typeA


concept(
    "eval-013",
    "Which of the following is a boson",
    "A helium-4 atom",
    "He-4 contains 6 fermions (even) -> boson; He-3 has 5.",
)


@calc("eval-014", "high-spin octahedral Fe³⁺")
def eval_014():
    d = 26 - 3 - 18  # Fe3+ beyond [Ar]: 3d electrons (4s lost first)
    unpaired = d if d <= 5 else 10 - d  # high-spin octahedral
    return math.sqrt(unpaired * (unpaired + 2))


concept("eval-015", "placenta", "IgG", "Only IgG is transported across the placenta (FcRn).")


@calc("eval-016", "(|↑⟩ + √3 |↓⟩)/2")
def eval_016():
    a2, b2 = Fraction(1, 4), Fraction(3, 4)  # |1/2|^2 and |sqrt(3)/2|^2
    assert a2 + b2 == 1
    return a2
