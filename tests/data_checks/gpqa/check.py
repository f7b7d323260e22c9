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

Run:  python tests/data_checks/gpqa/check.py
"""

import json
import os
import sys
from collections import Counter
from fractions import Fraction

import checks_eval  # noqa: F401  (registers the eval split's checks)
import checks_train  # noqa: F401  (registers the train split's checks)
from checklib import ABS_TOL, CALC, CONCEPT, DOMAINS, HERE, parse


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
