"""Verification of the multiple-choice science data in train.jsonl / eval.jsonl.

* Schema: exactly four distinct choices, a letter answer, a known domain, ids
  in order, and the correct letter spread evenly (12 each in train, 4 each in eval).
* Calculation questions: a function per id recomputes the quantity from the
  data given in the question (exact Fractions where the answer is exact,
  otherwise floats with CODATA constants). The choice under the answer letter
  must match it: exactly, or within 1% relative (ABS_TOL for logarithmic
  quantities such as pH or potentials). Every distractor must be clearly off:
  more than 3% relative, or more than 3x ABS_TOL.
* Conceptual questions: textbook facts. For each one the expected correct text
  is listed (with the reason), and the choice under the answer letter must be
  exactly that text.

Every entry also names a fingerprint substring of the question, so the checks
cannot drift out of sync with the data file.

Run:  python tsrl/tasks/data/gpqa/check.py
"""

import itertools
import json
import math
import os
import re
import sys
from collections import Counter
from fractions import Fraction

HERE = os.path.dirname(os.path.abspath(__file__))
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

CALC = {}        # id -> (fingerprint, fn)
CONCEPT = {}     # id -> (fingerprint, expected correct text, reason)
ABS_TOL = {}     # id -> absolute tolerance (for log-scale quantities)


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


# ================================================================== train
@calc("train-001", "Muons with a proper mean lifetime of 2.20")
def train_001():
    v = 0.990 * c
    gamma = 1 / math.sqrt(1 - 0.990 ** 2)
    return gamma * v * 2.20e-6 / 1000  # km


@calc("train-002", "0.20 M NH3 and 0.10 M NH4Cl", abs_tol=0.01)
def train_002():
    pKa = 14.00 - 4.75
    return pKa + math.log10(0.20 / 0.10)


@calc("train-003", "20 map units apart")
def train_003():
    rf = Fraction(20, 100)
    gamete_Ab = rf / 2  # recombinant classes Ab and aB are equally frequent
    return gamete_Ab * 100  # percent of testcross progeny that are Ab/ab


@calc("train-004", "accelerated through a potential difference of 100 V")
def train_004():
    return h / math.sqrt(2 * m_e * e * 100) * 1e9  # nm


@calc("train-005", "What mass of CO2")
def train_005():
    n = 2.00 * 10.0 / (R_ATM * 300)
    return n * 44.01


@calc("train-006", "carrier of an X-linked recessive disorder")
def train_006():
    mother = ["XA", "Xa"]
    father = ["XA", "Y"]
    kids = list(itertools.product(mother, father))
    affected_sons = sum(1 for m, f in kids if f == "Y" and m == "Xa")
    return Fraction(affected_sons, len(kids))


@calc("train-007", "n = 3 → n = 2 transition")
def train_007():
    R_H = 1.0968e7
    return 1 / (R_H * (Fraction(1, 4) - Fraction(1, 9))) * 1e9  # nm


@calc("train-008", "combustion of 16.0 g of methane")
def train_008():
    M_CH4 = AW["C"] + 4 * AW["H"]
    M_H2O = 2 * AW["H"] + AW["O"]
    return 16.0 / M_CH4 * 2 * M_H2O  # CH4 + 2 O2 -> CO2 + 2 H2O


@calc("train-009", "doubling time of 20 minutes")
def train_009():
    return 1.0e3 * 2 ** (3.0 * 60 / 20)


@calc("train-010", "infinite square well of width 1.00 nm")
def train_010():
    L = 1.00e-9
    return h ** 2 / (8 * m_e * L ** 2) / e  # eV


@calc("train-011", "10.0 g of H2 and 64.0 g of O2")
def train_011():
    n_H2 = 10.0 / (2 * AW["H"])
    n_O2 = 64.0 / (2 * AW["O"])
    n_H2O = min(n_H2, 2 * n_O2)  # 2 H2 + O2 -> 2 H2O
    return n_H2O * (2 * AW["H"] + AW["O"])


@calc("train-012", "Km = 2.0 mM")
def train_012():
    Km, S = Fraction(2), Fraction(6)
    return S / (Km + S) * 100  # percent of Vmax


@calc("train-013", "Carnot) heat pump")
def train_013():
    Th, Tc = 295, 270
    return Fraction(Th, Th - Tc)


@calc("train-014", "K = 1.0 × 10^3 at 298 K")
def train_014():
    return -R * 298 * math.log(1.0e3) / 1000  # kJ/mol


@calc("train-015", "22% adenine")
def train_015():
    A = Fraction(22)
    T = A
    return (100 - A - T) / 2  # G = C


@calc("train-016", "twice Earth's mass and twice Earth's radius")
def train_016():
    # v_esc = sqrt(2GM/R) scales as sqrt(M/R)
    return 11.2 * math.sqrt(2 / 2)


@calc("train-017", "half-life of 12.0 min")
def train_017():
    k = math.log(2) / 12.0
    return math.log(1 / 0.100) / k


@calc("train-018", "Met–Leu–Trp")
def train_018():
    # NCBI translation table 1, codons in TCAG order (first, second, third base)
    aas = "FFLLSSSSYY**CC*WLLLLPPPPHHQQRRRRIIIMTTTTNNKKSSRRVVVVAAAADDEEGGGG"
    bases = "UCAG"
    table = {a + b + cc: aas[16 * i + 4 * j + k]
             for i, a in enumerate(bases) for j, b in enumerate(bases) for k, cc in enumerate(bases)}
    assert table["AUG"] == "M" and table["UGG"] == "W" and table["UAA"] == "*"
    count = Counter(table.values())
    return count["M"] * count["L"] * count["W"]


@calc("train-019", "charged through a 10.0 kΩ resistor")
def train_019():
    tau = 10.0e3 * 47.0e-6
    return -tau * math.log(1 - 0.900)


@calc("train-020", "0.500 mol NaCl in 1.00 kg of water", abs_tol=0.01)
def train_020():
    i = 2  # Na+ and Cl-
    return 0.0 - i * 1.86 * 0.500 / 1.00


@calc("train-021", "Labrador retrievers")
def train_021():
    gametes = [(b, ee) for b in "Bb" for ee in "Ee"]
    yellow = total = 0
    for g1, g2 in itertools.product(gametes, repeat=2):
        total += 1
        yellow += (g1[1] + g2[1]) == "ee"
    return Fraction(yellow, total)


@calc("train-022", "L = 10.0 mH and C = 100 nF")
def train_022():
    return 1 / (2 * math.pi * math.sqrt(10.0e-3 * 100e-9)) / 1000  # kHz


@calc("train-023", "0.100 M aqueous glucose")
def train_023():
    return 1 * 0.100 * R_ATM * 310


concept("train-024", "positive supercoiling",
        "DNA gyrase (a type II topoisomerase)",
        "Gyrase (topoisomerase II) removes positive supercoils ahead of the fork; helicase creates them.")


@calc("train-025", "source emitting 500 Hz moves at 68.0 m/s")
def train_025():
    v, vs = Fraction(340), Fraction(68)
    return 500 * v / (v - vs)


@calc("train-026", "absorbance of 0.600")
def train_026():
    return Fraction("0.600") / (Fraction("1.20e4") * 1)


concept("train-027", "where does glycolysis take place",
        "Cytosol", "Glycolysis is cytosolic in all eukaryotic cells.")


@calc("train-028", "Compton-scatters")
def train_028():
    theta = math.pi / 2
    return h / (m_e * c) * (1 - math.cos(theta)) * 1e12  # pm


concept("train-029", "molecular geometry of SF4",
        "Seesaw", "AX4E: 4 bonding pairs + 1 lone pair -> seesaw.")


concept("train-030", "binds the lac repressor",
        "Allolactose", "Allolactose is the natural inducer that binds LacI.")


@calc("train-031", "first-order Bragg reflection")
def train_031():
    return math.degrees(math.asin(1 * 0.154 / (2 * 0.282)))


concept("train-032", "species is aromatic",
        "Cyclopentadienyl anion (C5H5⁻)", "6 pi electrons, planar, cyclic, fully conjugated (Hueckel 4n+2).")


@calc("train-033", "N = 50")
def train_033():
    N = 50
    return Fraction(1, 2 * N)


@calc("train-034", "Star X has twice the radius")
def train_034():
    # L = 4 pi R^2 sigma T^4
    return Fraction(2) ** 2 * Fraction(1, 2) ** 4


concept("train-035", "ethyl acetate",
        "Quartet", "OCH2 is coupled to 3 equivalent CH3 protons: n+1 = 4.")


@calc("train-036", "6-bp restriction site")
def train_036():
    return 4 ** 6


@calc("train-037", "uniform solid sphere")
def train_037():
    g, hgt = 9.80, 1.40
    # m g h = 1/2 m v^2 + 1/2 (2/5 m r^2)(v/r)^2
    return math.sqrt(g * hgt / (Fraction(1, 2) + Fraction(1, 5)))


concept("train-038", "chromium atom",
        "[Ar] 3d⁵ 4s¹", "Textbook aufbau exception (half-filled 3d subshell).")


concept("train-039", "P680",
        "Photosystem II", "P680 is the PSII reaction center; PSI is P700.")


@calc("train-040", "+2.00 μC and −3.00 μC")
def train_040():
    charges = [(2.00e-6, 0.0), (-3.00e-6, 0.500)]
    x = 0.250
    E = 0.0
    for q, pos in charges:
        r = x - pos
        E += k_C * q * r / abs(r) ** 3  # signed 1-D field
    return abs(E)


concept("train-041", "[Fe(CN)6]⁴⁻",
        "0", "Fe(II) d6 low spin: t2g^6 eg^0, diamagnetic.")


@calc("train-042", "circular loop of wire of radius 5.00 cm")
def train_042():
    return mu0 * 10.0 / (2 * 0.0500)


@calc("train-043", "Iodine-131")
def train_043():
    return 10.0 * 0.5 ** (24.0 / 8.02)


@calc("train-044", "expands reversibly and isothermally to twice")
def train_044():
    return 1 * R * math.log(2)


@calc("train-045", "50.0 g of ice")
def train_045():
    n = 50.0 / (2 * AW["H"] + AW["O"])
    q = n * 6.01 + 50.0 * 4.184 * 100 / 1000 + n * 40.7
    return q  # kJ


concept("train-046", "Noether",
        "Linear momentum", "Spatial translation symmetry <-> momentum conservation.")


@calc("train-047", "N2O4(g) ⇌ 2 NO2(g)")
def train_047():
    no2 = Fraction("0.400")
    n2o4 = Fraction("1.00") - no2 / 2
    return no2 ** 2 / n2o4


@calc("train-048", "He⁺")
def train_048():
    Z = 2
    return -13.6 * Z ** 2


# ================================================================== eval
@calc("eval-001", "proton (rest energy 938.3 MeV)")
def eval_001():
    gamma = 1 / math.sqrt(1 - 0.600 ** 2)
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
    return 2 * math.pi * math.sqrt(r ** 3 / GM) / 60  # minutes


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


concept("eval-011", "2,3-dibromobutane",
        "3", "(2R,3R), (2S,3S) and the meso (2R,3S) form.")


@calc("eval-012", "ABO allele frequencies")
def eval_012():
    freq = {"A": Fraction(3, 10), "B": Fraction(1, 10), "i": Fraction(6, 10)}
    typeA = Fraction(0)
    for a1, a2 in itertools.product(freq, repeat=2):
        pheno = "".join(sorted({a1, a2} - {"i"})) or "O"
        if pheno == "A":
            typeA += freq[a1] * freq[a2]
    return typeA


concept("eval-013", "Which of the following is a boson",
        "A helium-4 atom", "He-4 contains 6 fermions (even) -> boson; He-3 has 5.")


@calc("eval-014", "high-spin octahedral Fe³⁺")
def eval_014():
    d = 26 - 3 - 18  # Fe3+ beyond [Ar]: 3d electrons (4s lost first)
    unpaired = d if d <= 5 else 10 - d  # high-spin octahedral
    return math.sqrt(unpaired * (unpaired + 2))


concept("eval-015", "placenta",
        "IgG", "Only IgG is transported across the placenta (FcRn).")


@calc("eval-016", "(|↑⟩ + √3 |↓⟩)/2")
def eval_016():
    a2, b2 = Fraction(1, 4), Fraction(3, 4)  # |1/2|^2 and |sqrt(3)/2|^2
    assert a2 + b2 == 1
    return a2


# ================================================================== driver
def load(split):
    with open(os.path.join(HERE, f"{split}.jsonl"), encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def verify_calc(r, fn):
    target = fn()
    letter_idx = "ABCD".index(r["answer"])
    vals = [parse(ch) for ch in r["choices"]]
    tol = ABS_TOL.get(r["id"])

    def err(v):
        if isinstance(target, (Fraction, int)):
            return abs(v - target) if tol else (abs(v - target) / abs(target) if target else abs(v))
        v = float(v)
        return abs(v - target) if tol else abs(v - target) / abs(target)

    exact = isinstance(target, (Fraction, int)) and tol is None
    errs = [err(v) for v in vals]
    if exact:
        ok_correct = errs[letter_idx] == 0
        ok_distract = all(e_ > 0.03 for i, e_ in enumerate(errs) if i != letter_idx)
    elif tol:
        ok_correct = errs[letter_idx] <= tol
        ok_distract = all(e_ > 3 * tol for i, e_ in enumerate(errs) if i != letter_idx)
    else:
        ok_correct = errs[letter_idx] <= 0.01
        ok_distract = all(e_ > 0.03 for i, e_ in enumerate(errs) if i != letter_idx)
    shown = float(target)
    return ok_correct and ok_distract, f"computed={shown:.6g} choice={r['choices'][letter_idx]!r}"


def main():
    failures = 0
    ids = set()
    for split, n in (("train", 48), ("eval", 16)):
        rows = load(split)
        assert len(rows) == n, (split, len(rows))
        assert [r["id"] for r in rows] == [f"{split}-{i:03d}" for i in range(1, n + 1)]
        letters = Counter(r["answer"] for r in rows)
        assert letters == Counter({L: n // 4 for L in "ABCD"}), (split, letters)
        for r in rows:
            assert set(r) == {"id", "question", "choices", "answer", "domain", "explanation"}, r["id"]
            assert isinstance(r["choices"], list) and len(r["choices"]) == 4, r["id"]
            assert len(set(r["choices"])) == 4 and all(ch.strip() for ch in r["choices"]), r["id"]
            assert r["answer"] in ("A", "B", "C", "D"), r["id"]
            assert r["domain"] in DOMAINS, r["id"]
            assert r["question"].strip() and r["explanation"].strip(), r["id"]
            ids.add(r["id"])
            correct = r["choices"]["ABCD".index(r["answer"])]
            if r["id"] in CALC:
                fp, fn = CALC[r["id"]]
                assert fp in r["question"], (r["id"], "fingerprint mismatch")
                ok, msg = verify_calc(r, fn)
                kind = "calc"
            else:
                fp, expected, _reason = CONCEPT[r["id"]]
                assert fp in r["question"], (r["id"], "fingerprint mismatch")
                ok = correct == expected
                msg = f"expected={expected!r} choice={correct!r}"
                kind = "fact"
            failures += not ok
            print(f"{r['id']}  {r['answer']}  {kind:4s}  {'OK' if ok else 'FAIL'}  {msg}")
    assert ids == set(CALC) | set(CONCEPT), "check entries and data ids differ"
    if failures:
        print(f"FAILED: {failures}")
        sys.exit(1)
    print(f"all {len(ids)} questions verified ({len(CALC)} by calculation, {len(CONCEPT)} textbook facts)")


if __name__ == "__main__":
    main()
