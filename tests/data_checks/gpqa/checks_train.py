"""The train split's checks for check.py: one function per id, registered in checklib."""

import itertools
import math
from collections import Counter
from fractions import Fraction

from checklib import AW, R_ATM, R, c, calc, concept, e, h, k_C, m_e, mu0


# ================================================================== train
@calc("train-001", "Muons with a proper mean lifetime of 2.20")
def train_001():
    v = 0.990 * c
    gamma = 1 / math.sqrt(1 - 0.990**2)
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
    return h**2 / (8 * m_e * L**2) / e  # eV


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
    table = {
        a + b + cc: aas[16 * i + 4 * j + k]
        for i, a in enumerate(bases)
        for j, b in enumerate(bases)
        for k, cc in enumerate(bases)
    }
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


concept(
    "train-024",
    "positive supercoiling",
    "DNA gyrase (a type II topoisomerase)",
    "Gyrase (topoisomerase II) removes positive supercoils ahead of the fork; helicase creates them.",
)


@calc("train-025", "source emitting 500 Hz moves at 68.0 m/s")
def train_025():
    v, vs = Fraction(340), Fraction(68)
    return 500 * v / (v - vs)


@calc("train-026", "absorbance of 0.600")
def train_026():
    return Fraction("0.600") / (Fraction("1.20e4") * 1)


concept("train-027", "where does glycolysis take place", "Cytosol", "Glycolysis is cytosolic in all eukaryotic cells.")


@calc("train-028", "Compton-scatters")
def train_028():
    theta = math.pi / 2
    return h / (m_e * c) * (1 - math.cos(theta)) * 1e12  # pm


concept("train-029", "molecular geometry of SF4", "Seesaw", "AX4E: 4 bonding pairs + 1 lone pair -> seesaw.")


concept("train-030", "binds the lac repressor", "Allolactose", "Allolactose is the natural inducer that binds LacI.")


@calc("train-031", "first-order Bragg reflection")
def train_031():
    return math.degrees(math.asin(1 * 0.154 / (2 * 0.282)))


concept(
    "train-032",
    "species is aromatic",
    "Cyclopentadienyl anion (C5H5⁻)",
    "6 pi electrons, planar, cyclic, fully conjugated (Hueckel 4n+2).",
)


@calc("train-033", "N = 50")
def train_033():
    N = 50
    return Fraction(1, 2 * N)


@calc("train-034", "Star X has twice the radius")
def train_034():
    # L = 4 pi R^2 sigma T^4
    return Fraction(2) ** 2 * Fraction(1, 2) ** 4


concept("train-035", "ethyl acetate", "Quartet", "OCH2 is coupled to 3 equivalent CH3 protons: n+1 = 4.")


@calc("train-036", "6-bp restriction site")
def train_036():
    return 4**6


@calc("train-037", "uniform solid sphere")
def train_037():
    g, hgt = 9.80, 1.40
    # m g h = 1/2 m v^2 + 1/2 (2/5 m r^2)(v/r)^2
    return math.sqrt(g * hgt / (Fraction(1, 2) + Fraction(1, 5)))


concept("train-038", "chromium atom", "[Ar] 3d⁵ 4s¹", "Textbook aufbau exception (half-filled 3d subshell).")


concept("train-039", "P680", "Photosystem II", "P680 is the PSII reaction center; PSI is P700.")


@calc("train-040", "+2.00 μC and −3.00 μC")
def train_040():
    charges = [(2.00e-6, 0.0), (-3.00e-6, 0.500)]
    x = 0.250
    E = 0.0
    for q, pos in charges:
        r = x - pos
        E += k_C * q * r / abs(r) ** 3  # signed 1-D field
    return abs(E)


concept("train-041", "[Fe(CN)6]⁴⁻", "0", "Fe(II) d6 low spin: t2g^6 eg^0, diamagnetic.")


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


concept("train-046", "Noether", "Linear momentum", "Spatial translation symmetry <-> momentum conservation.")


@calc("train-047", "N2O4(g) ⇌ 2 NO2(g)")
def train_047():
    no2 = Fraction("0.400")
    n2o4 = Fraction("1.00") - no2 / 2
    return no2**2 / n2o4


@calc("train-048", "He⁺")
def train_048():
    Z = 2
    return -13.6 * Z**2
