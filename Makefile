# lucid — build, demo and tests. `make demo` and `make test` work from a fresh clone.

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
LIB    := $(if $(filter Darwin,$(shell uname -s)),liblucid.dylib,liblucid.so)

.PHONY: build engine demo test swift-test py-test check-sanitize reliability bench clean

## build: the engine (release), a .venv with numpy/ml_dtypes/pytest/scikit-learn, and lucid installed into it
build: engine $(VENV)/.installed

engine:
	swift build -c release --product lucid
	@mkdir -p lucid/_lib
	@# (copied beside it and renamed over it: a process that has the old library loaded keeps it intact)
	@cmp -s .build/release/$(LIB) lucid/_lib/$(LIB) || \
	  { cp .build/release/$(LIB) lucid/_lib/$(LIB).new && mv -f lucid/_lib/$(LIB).new lucid/_lib/$(LIB); }

$(PY):
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed: $(PY) pyproject.toml setup.py
	LUCID_SKIP_ENGINE_BUILD=1 $(PY) -m pip install -q --disable-pip-version-check -e '.[test,demo]'
	@touch $@

## demo: trains a digits classifier on "metal" in float32 and under autocast + GradScaler
demo: build
	$(PY) examples/demo.py

## test: Swift tests, then the Python tests
test: build swift-test py-test

swift-test:
	swift test

py-test:
	$(PY) -m pytest -q

## check-sanitize: the Swift tests (threads, scopes, caches, C ABI) under ThreadSanitizer and
## AddressSanitizer; CI runs it after `make test`
check-sanitize:
	swift test --sanitize=thread
	LSAN_OPTIONS=suppressions=$(CURDIR)/tests/lsan.supp swift test --sanitize=address

## reliability: the reliability tests in their full form (a few minutes), then RELIABILITY.md
## from what they logged; `make test` runs their short form
RELIABILITY_LOG := .build/reliability.jsonl

reliability: build
	@mkdir -p .build && rm -f $(RELIABILITY_LOG)
	LUCID_RELIABILITY=full LUCID_RELIABILITY_LOG=$(CURDIR)/$(RELIABILITY_LOG) $(PY) -m pytest -q tests/reliability
	$(PY) tests/reliability/report.py $(RELIABILITY_LOG) RELIABILITY.md

## bench: the benchmark suite against numpy (and PyTorch with TORCH=1, installed into
## .venv-bench only, never as a dependency of lucid); BENCH_ARGS="--write bench/RESULTS.md"
BENCH_VENV := .venv-bench
BENCH_PY   := $(if $(filter 1,$(TORCH)),$(BENCH_VENV)/bin/python,$(PY))

bench: build $(if $(filter 1,$(TORCH)),$(BENCH_VENV)/.installed)
	$(BENCH_PY) bench/suite.py $(BENCH_ARGS)

$(BENCH_VENV)/.installed: pyproject.toml setup.py
	$(PYTHON) -m venv $(BENCH_VENV)
	LUCID_SKIP_ENGINE_BUILD=1 $(BENCH_VENV)/bin/python -m pip install -q --disable-pip-version-check -e . torch
	@touch $@

clean:
	rm -rf .build $(VENV) $(BENCH_VENV) lucid/_lib build *.egg-info
