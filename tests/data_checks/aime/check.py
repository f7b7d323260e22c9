"""Independent verification of every answer in train.jsonl / eval.jsonl.

Each problem id has its own function that recomputes the answer from scratch,
by brute-force enumeration where feasible and otherwise with exact integer /
Fraction arithmetic (no floating point anywhere). Every function also names a
fingerprint substring that has to occur in the problem text, so the functions
cannot silently drift out of sync with the data file.

Run:  python tests/data_checks/aime/check.py
"""

import json
import os
import sys

import checks_eval  # noqa: F401  (registers the eval split's checks)
import checks_train  # noqa: F401  (registers the train split's checks)
from checklib import CHECKS, HERE, TOPICS


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
