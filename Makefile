# lucid — build, demo and tests. `make demo` and `make test` work from a fresh clone.

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
LIB    := $(if $(filter Darwin,$(shell uname -s)),liblucid.dylib,liblucid.so)
PIP    := -m pip install -q --disable-pip-version-check

# What a goal needs from the machine is checked before anything runs; a missing piece stops
# make with one line that names it and says how to get it (tools/prereqs.sh).
GOALS   := $(or $(MAKECMDGOALS),build)
PREREQS := $(if $(filter build engine demo test swift-test check-sanitize check-wheel metal-emulated check-metal reliability bench,$(GOALS)),swift python) \
           $(if $(filter test py-test reliability,$(GOALS)),cc) \
           $(if $(filter test-distributed docs,$(GOALS)),python)
ifneq ($(strip $(PREREQS)),)
PREREQ_PROBLEM := $(shell PYTHON='$(PYTHON)' VENV='$(VENV)' sh tools/prereqs.sh $(PREREQS))
ifneq ($(PREREQ_PROBLEM),)
$(error $(PREREQ_PROBLEM))
endif
endif

# On Linux the engine links OpenBLAS and oneDNN from PyPI packages installed into .venv. SwiftPM
# finds them through .venv/lib/pkgconfig/lucid-native.pc (`python lucid/_native.py pkg-config`),
# the one variable below: headers and libraries for every target, and the run path of what is
# linked, so nothing needs environment variables at run time. (Nothing on macOS: Accelerate.)
NATIVE_PC := $(if $(filter Linux,$(shell uname -s)),$(VENV)/lib/pkgconfig/lucid-native.pc)
export PKG_CONFIG_PATH := $(CURDIR)/$(VENV)/lib/pkgconfig$(if $(PKG_CONFIG_PATH),:$(PKG_CONFIG_PATH))
# What a Swift build needs first: .venv with the libraries, and the file that points at them.
SWIFT_READY := $(VENV)/.installed $(NATIVE_PC)

# LUCID_NO_METAL=1 (in the environment or on the command line) builds the engine and the Swift
# tests without the Metal backend, so that even on a Mac "metal" runs on the host fallback, as
# on Linux: GitHub's hosted Macs, which have no GPU Metal compute can use, run `make test` so
# (.github/workflows/macos.yml). The one Swift test that expects Metal wherever `import Metal`
# works is skipped then.
SWIFT_FLAGS = $(if $(filter 1,$(LUCID_NO_METAL)),-Xswiftc -DLUCID_NO_METAL)
SWIFT_RELEASE_FLAGS = $(shell $(PY) lucid/_native.py release-flags) $(SWIFT_FLAGS)
NO_METAL_SKIP  = $(if $(filter 1,$(LUCID_NO_METAL)),--skip metalIsAvailableWhereTheMetalBackendIsBuilt)

.PHONY: build engine abi demo test lint test-distributed swift-test swift-examples py-test docs check-sanitize check-wheel metal-emulated check-metal check-apple reliability bench opinfo-reference clean

## build: .venv with lucid's dependencies (OpenBLAS and oneDNN among them on Linux), the
## engine in release mode, and lucid installed into .venv (editable)
build: engine

engine: $(SWIFT_READY)
	@$(PY) tools/embed_metal.py --check
ifeq ($(shell uname -s),Darwin)
	@# A Metal backend that fails to compile must not leave a Mac without lucid: build without
	@# it (the host fallback serves "metal"), and say so loudly.
	swift build -c release --product lucid $(SWIFT_RELEASE_FLAGS) || { \
	  echo "lucid: WARNING: the engine failed to build with its Metal backend (errors above); building it without Metal, so 'metal' will run on the host fallback. Please report those errors." >&2; \
	  swift build -c release --product lucid $(SWIFT_RELEASE_FLAGS) -Xswiftc -DLUCID_NO_METAL; }
else
	swift build -c release --product lucid $(SWIFT_RELEASE_FLAGS)
endif
	@mkdir -p lucid/_lib
	@# (copied beside it and renamed over it: a process that has the old library loaded keeps it intact)
	@cmp -s .build/release/$(LIB) lucid/_lib/$(LIB) || \
	  { cp .build/release/$(LIB) lucid/_lib/$(LIB).new && mv -f lucid/_lib/$(LIB).new lucid/_lib/$(LIB); }

$(PY):
	$(PYTHON) -m venv $(VENV)

# The editable install brings the dependencies; the engine library in lucid/_lib is the
# `engine` goal's to make, so the install does not build it.
$(VENV)/.installed: $(PY) pyproject.toml setup.py
	$(PY) $(PIP) 'setuptools>=64' wheel
	LUCID_SKIP_ENGINE_BUILD=1 $(PY) $(PIP) --no-build-isolation -e '.[test,demo,build]'
	@touch $@

ifneq ($(NATIVE_PC),)
$(NATIVE_PC): $(VENV)/.installed lucid/_native.py
	$(PY) lucid/_native.py pkg-config $(dir $@) >/dev/null
endif

## generate: the generated sources, from their one source each: lucid/_C/_abi.py and _ops.py
## (the ctypes declarations, enum codes and a function per entry point) from include/lucid.h,
## and MetalKernelSource.swift from the
## Metal kernels (Kernels/*.metal). Builds and `make test` check that both are up to date.
generate:
	$(PYTHON) tools/gen_abi.py
	$(PYTHON) tools/embed_metal.py

## demo: trains a digits classifier on "metal" in float32 and under autocast + GradScaler
demo: build
	$(PY) examples/demo.py

## test: the linters, the Swift tests, then the Python tests
test: build lint swift-test py-test

## lint: the formatters and linters: ruff over the Python code (pyproject.toml's [tool.ruff])
## and the toolchain's swift-format over the Swift code (.swift-format; the generated
## MetalKernelSource.swift aside): the code must be as they write it (`ruff format`,
## `swift format --in-place` make it so), with nothing to report
SWIFT_SOURCES = $(shell find Sources tests/swift tests/metal Package.swift -name '*.swift' ! -name MetalKernelSource.swift)
lint: $(VENV)/.installed
	$(PY) -m ruff format --check --quiet .
	$(PY) -m ruff check --quiet .
	@echo "swift format lint --strict <the Swift sources>"
	@swift format lint --strict $(SWIFT_SOURCES)

swift-test: $(SWIFT_READY)
	swift test $(SWIFT_FLAGS) $(NO_METAL_SKIP)

py-test:
	$(PY) -m pytest -q

## swift-examples: the Swift example programs (examples/swift, a package that depends on this
## one) built as an app's developer builds them, with PKG_CONFIG_PATH alone on Linux, and run
## against the Python API: `deploy` on checkpoints Python wrote, `train`'s checkpoint in Python
swift-examples: build
	$(PY) -m pytest -q tests/swift_examples

## test-distributed: lucid.distributed, DistributedDataParallel and ZeroRedundancyOptimizer on
## two MPI processes (mpiexec -n 2; as root also on two simulated hosts, network namespaces
## joined by a veth link, with a rank killed on either), after installing the `distributed`
## extra (mpi4py and MPICH from PyPI) into .venv; CI runs it after `make test`
test-distributed: $(VENV)/.distributed lucid/_lib/$(LIB)
	LUCID_REQUIRE_MPI=1 $(PY) -m pytest -q tests/distributed

$(VENV)/.distributed: $(VENV)/.installed
	LUCID_SKIP_ENGINE_BUILD=1 $(PY) $(PIP) --no-build-isolation -e '.[test,demo,build,distributed]'
	@touch $@

## docs: the guide (docs/guide/) and the API reference as HTML in build/docs/html: lucid's
## Python API from its docstrings, and the Swift API and the C ABI written from
## Sources/LucidEngine/API/*.swift and include/lucid.h at each build (tools/gen_api_docs.py).
## Sphinx, from the `docs` extra, is installed into .venv when missing; the build fetches
## nothing, and any warning fails it
DOCS_OUT := build/docs

docs: $(VENV)/.docs lucid/_lib/$(LIB)
	$(PY) -m sphinx -b html -E -W --keep-going -d $(DOCS_OUT)/doctrees docs $(DOCS_OUT)/html
	@echo "lucid: the guide and API reference are in $(DOCS_OUT)/html/index.html"

# Only the extra's requirements: lucid itself stays installed as it is (editable).
$(VENV)/.docs: $(VENV)/.installed pyproject.toml
	$(PY) tools/extra_requirements.py docs > $(VENV)/.docs-requirements
	$(PY) $(PIP) -r $(VENV)/.docs-requirements
	@touch $@

# The engine, when there is none yet (`make build` rebuilds it when the sources change).
lucid/_lib/$(LIB):
	$(MAKE) engine

## check-sanitize: the Swift tests (threads, scopes, caches, C ABI) under ThreadSanitizer and
## AddressSanitizer; CI runs it after `make test`
check-sanitize: $(SWIFT_READY)
	swift test --sanitize=thread $(SWIFT_FLAGS)
	LSAN_OPTIONS=suppressions=$(CURDIR)/tests/lsan.supp swift test --sanitize=address $(SWIFT_FLAGS)

## check-wheel: `pip install .` into a fresh venv outside the checkout, then lucid run with the
## Swift toolchain and any system OpenBLAS/oneDNN hidden (tools/check-wheel.sh); CI runs it
check-wheel:
	PYTHON='$(PYTHON)' bash tools/check-wheel.sh

## metal-emulated: the check build, whose "metal" device runs on the Metal backend compiled
## against an emulation of the Metal API (tests/metal), the .metal kernels compiled as C++
## (after a strict syntax check of each kernel library: tests/metal/check_msl_strict.py);
## prints the library's path last (load it with LUCID_ENGINE_LIBRARY=<path>)
METAL_SCRATCH := .build/metal-emulated
METAL_LIB      = $(CURDIR)/$(METAL_SCRATCH)/release/$(LIB)
METAL_SWIFT    = LUCID_METAL_EMULATION=1 swift
METAL_FLAGS    = --scratch-path $(METAL_SCRATCH) --manifest-cache none $(SWIFT_FLAGS)

metal-emulated: $(SWIFT_READY)
	@$(PY) tools/embed_metal.py --check
	@# Each kernel library alone, with distinct address spaces, under -Werror (check_msl_strict.py).
	$(PY) tests/metal/check_msl_strict.py --clang "$$(dirname "$$(command -v swift)")/clang" $$($(PY) tools/embed_metal.py --list)
	$(PY) tests/metal/gen_kernels.py --clang "$$(dirname "$$(command -v swift)")/clang" \
	  --out tests/metal/MSLKernels/kernels.cpp $$($(PY) tools/embed_metal.py --list) \
	  --test-library tests/metal/EmulationTestKernels.metal
	$(METAL_SWIFT) build -c release --product lucid $(METAL_FLAGS)
	@echo $(METAL_LIB)

## check-metal: the Swift tests and the Python tests with "metal" on the emulated Metal backend
check-metal: metal-emulated
	$(METAL_SWIFT) test $(METAL_FLAGS)
	LUCID_REQUIRE_METAL=1 LUCID_ENGINE_LIBRARY=$(METAL_LIB) $(PY) -m pytest -q

## check-apple: type-checks and compiles (-c -O -wmo, arm64) CHostKernels, LucidEngine,
## LucidCABI and the Swift tests that need no emulation against Apple's real SDK, given as
## APPLE_SDK=<path> (tools/check-apple.sh); without one it says how to get one and passes
check-apple:
	APPLE_SDK='$(APPLE_SDK)' bash tools/check-apple.sh

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
	$(BENCH_VENV)/bin/python $(PIP) 'setuptools>=64' wheel
	LUCID_SKIP_ENGINE_BUILD=1 $(BENCH_VENV)/bin/python $(PIP) --no-build-isolation -e . torch
	@touch $@

## opinfo-reference: records PyTorch's outcomes on its own op database (op_db, module_db) into
## tests/differential/opinfo_reference.json.gz, with PyTorch and expecttest in .venv-bench;
## `make test` then checks lucid against them offline (tools/opinfo_parity.py)
opinfo-reference: $(BENCH_VENV)/.installed
	$(BENCH_VENV)/bin/python $(PIP) expecttest
	$(BENCH_VENV)/bin/python tools/opinfo_parity.py --record

clean:
	rm -rf .build $(VENV) $(BENCH_VENV) lucid/_lib build *.egg-info
