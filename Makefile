# Two commands for a fresh machine: `make serve` and `make test`. Each sets up what it
# needs first; `install` is quick when nothing changed (it only reruns when the pins do).
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
export NO_MKDOCS_2_WARNING := 1

.PHONY: setup install math-font serve build build-zensical record bench check current lint \
	fresh test tier test-two-lessons browser java mpi audit docs-build clean

# What building, serving and recording use (`make serve`, `make build`, `make record`):
# requirements.txt (the lesson's runtime with the site's pins, so a reader who serves can
# also run the lesson) and Temml. `install` adds the tests' and the linter's tools, for
# `make check` and `make test` (axe-core and the Nu checker); `make test` also asks for
# Chromium, Java and Open MPI.
setup: $(VENV)/.installed node_modules/.built math-font
install: setup $(VENV)/.tested node_modules/.tested

# uv installs the same pins as pip in a fraction of the time (it fetches and unpacks in
# parallel): the uv the TPU job gives the VM, read from its one constant. --compile-bytecode
# because pip compiles every module as it installs and uv does not: without it, with
# PYTHONDONTWRITEBYTECODE set, every process compiles JAX afresh.
# uv reads no pip.conf or PIP_* settings: behind a package mirror, set UV_INDEX_URL.
UV_VERSION := $(shell sed -n 's/^UV_VERSION = "\([0-9.]*\)"$$/\1/p' scripts/hardware/tpu.py)
UV_INSTALL = $(VENV)/bin/uv pip install --quiet --python $(PY) --compile-bytecode
# A .venv works only at the path it was made at: its activate script, its programs' first
# lines and its editable install name it. A moved checkout's is refused, not half used.
VENV_MADE_AT := $(shell sed -n 's/^VIRTUAL_ENV="\(.*\)"$$/\1/p' $(VENV)/bin/activate 2>/dev/null)
ifneq ($(filter-out $(abspath $(VENV)),$(VENV_MADE_AT)),)
ifeq ($(filter clean,$(MAKECMDGOALS)),)
$(error $(VENV) was made at $(VENV_MADE_AT), where its programs and its install of this \
	project point: rm -rf $(VENV) && make setup)
endif
endif

# Set-up installs only into this checkout's own .venv. Another's (IN_COPY below, or
# `make build VENV=<path>`) is used as that checkout set it up: installing this checkout into
# it would re-point the other's `mkdocs`, `pytest` and `import scripts` here.
ifeq ($(filter $(CURDIR)/%,$(abspath $(VENV))),)
$(VENV)/.installed $(VENV)/.tested:
	$(error $(VENV) is another checkout's .venv and is not set up: run make setup there)
else
# The project itself goes in editable (pyproject.toml), after its pins: with .venv
# activated, `mkdocs serve` imports the site's extension and hooks from this checkout.
$(VENV)/.installed: requirements.txt constraints.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check uv==$(UV_VERSION)
	$(UV_INSTALL) -r requirements.txt -c constraints.txt
	$(UV_INSTALL) --no-deps --editable .
	touch $@

$(VENV)/.tested: $(VENV)/.installed requirements-test.txt constraints.txt
	$(UV_INSTALL) -r requirements-test.txt -c constraints.txt
	touch $@
endif

# Temml, which the build runs under Node to write every formula as MathML
# (scripts/pages/typeset.cjs): package.json's one dependency. Its devDependencies are
# what the tests check the site with (axe-core, the Nu Html Checker). Pinned by
# package-lock.json; the site itself loads nothing from node_modules. npm ci empties
# node_modules first, so each stamp is written after it.
NPM_CI = npm ci --no-audit --no-fund --ignore-scripts --loglevel=error
node_modules/.built: package.json package-lock.json
	$(NPM_CI) --omit=dev
	touch $@

node_modules/.tested: package.json package-lock.json
	$(NPM_CI)
	touch $@ node_modules/.built

# Debian's Latin Modern Math, which every build cuts the site's math font from
# (scripts/pages/math_font.py pins its bytes).
MATH_FONT := /usr/share/texmf/fonts/opentype/public/lm-math/latinmodern-math.otf
math-font:
	@test -e $(MATH_FONT) || $(ENSURE) math-font $(MATH_FONT) fonts-lmodern "the math font"

# `python -m mkdocs`, which puts the current folder first on sys.path: in a copy made with
# another checkout's .venv (`make fresh`), the copy's own `scripts` is built with, not the
# checkout the .venv was installed from. In a checkout of its own, plain `mkdocs` is the same.
serve: setup
	$(PY) -m mkdocs serve --dev-addr 127.0.0.1:8000

build: setup
	$(PY) -m mkdocs build --strict
	$(PY) scripts/pages/check_links.py site

# The same site from Zensical, Material for MkDocs' successor, into site/ (MAINTAINING.md,
# "Zensical"): it reads mkdocs.yml (which copies in the files the pages serve from outside
# docs/) and runs the pages' Markdown extensions, but no MkDocs hook, so the math font is
# cut after. Pinned in requirements-test.txt, so `install`.
build-zensical: install
	$(PY) -m zensical build --clean
	$(PY) -m scripts.pages.math_font site
	$(PY) scripts/pages/check_links.py site

# Only what is stale runs (record.py keeps current lessons as they are); `make fresh`
# passes RECORD_FLAGS=--all, so its copy is recorded from scratch.
RECORD_FLAGS ?=
record: setup
	$(PY) scripts/record.py $(RECORD_FLAGS)
	$(PY) scripts/record.py --processes 4 $(RECORD_FLAGS)

# The message-size sweep is a benchmark, not a test: run it by hand on a quiet machine
# and commit what it wrote. `make check` still fails when it is stale.
bench: setup
	$(PY) scripts/bench.py

# Fails when a committed recording, figure or notebook no longer matches the code.
current: setup
	$(PY) scripts/record.py --check

# The quick check while working: the linter, freshness and the unit tier (about a minute).
check: install lint current
	$(PY) -m pytest

# ruff, then the pages' prose and the lesson files' size budgets (tests/lint_budgets.py).
lint: install
	$(VENV)/bin/ruff check .
	$(PY) tests/lint_budgets.py

# The tree as it is, copied into $(1) (under build/, gitignored), with node_modules linked.
COPY_TREE = rm -rf $(1) && mkdir -p $(1) && tar -c --exclude=./.git --exclude=./build \
	    --exclude=./site --exclude=./.venv --exclude=./node_modules \
	    --exclude=./benchmarks/node_modules --exclude=./test-artifacts \
	    --exclude=__pycache__ --exclude=./.pytest_cache --exclude=./.hypothesis \
	    --exclude=./.cache . | tar -x -C $(1) && ln -s $(CURDIR)/node_modules $(1)/node_modules
# A repository of its own in the copy $(1), holding it as it is: the TPU job's tests clone it.
COMMIT_COPY = git -C $(1) init -q && git -C $(1) add -A && \
	git -C $(1) -c user.name=make -c user.email=make@localhost commit -qm "make $(2)"
# `make` in a copy with this tree's environment: its stamps are current there too (tar keeps
# the pins' times; node_modules is the link above).
IN_COPY = $(MAKE) -C $(1) --no-print-directory VENV=$(CURDIR)/$(VENV)
# The tests of tier(s) $(2) (a -m expression; "" is every tier) in the copy $(1): whole files
# to two workers, the files with the most slow and browser tests first (tests/conftest.py).
# A worker lost is the run's end, not a replacement: pytest-xdist 3.8's loadfile scheduler
# can leave a replaced worker idle for good. Each test is bounded (pyproject.toml, timeout).
PYTEST_IN = cd $(1) && $(CURDIR)/$(PY) -m pytest tests benchmarks -m "$(2)" -n 2 \
	--dist loadfile --no-loadscope-reorder --max-worker-restart 0

# A copy of this tree in build/fresh, recorded afresh, built and tested there: `make test`
# never rewrites the committed recordings, figures or notebook, which change only through
# `make record` and `make bench`. --all: every lesson runs afresh, current or not.
FRESH := build/fresh
fresh: install
	$(call COPY_TREE,$(FRESH))
	$(call COMMIT_COPY,$(FRESH),fresh)
	$(call IN_COPY,$(FRESH)) RECORD_FLAGS=--all record build

# Debian packages the tests need, installed when missing (as root): one helper for all.
ENSURE = bash scripts/ensure_debian_package.sh

# Debian's chromium for the browser test; Playwright drives it, never a browser download.
browser:
	@$(ENSURE) browser /usr/bin/chromium chromium "the browser test"

# A Java runtime for the Nu Html Checker (node_modules/vnu-jar): Debian's
# default-jre-headless, Java 17 on bookworm, which vnu needs.
java:
	@$(ENSURE) java java default-jre-headless "the HTML checker"

# Debian's Open MPI (mpirun) for the launcher test: tests/test_launchers.py runs the four
# ranks under mpirun on loopback.
mpi:
	@$(ENSURE) mpi mpirun openmpi-bin "the mpirun test"

# Every tier: plain `pytest` is the unit tier alone (a minute), `pytest -m slow` and
# `pytest -m browser` the others (pyproject.toml).
test: install browser java mpi lint current fresh
	$(call PYTEST_IN,$(FRESH),)

# One tier in the copy `make fresh` made, as a CI job runs it (.github/workflows/site.yml):
# TIER=slow, TIER=browser, or TIER="not slow and not browser" (the unit tier).
TIER ?= not slow and not browser
tier: install
	$(call PYTEST_IN,$(FRESH),$(TIER))

# Every test iterates the registry: the whole suite passes with a second lesson registered
# beside the seed (tests/fixtures/second_lesson/, added as lesson_code/CONTRACT.md says) in a
# copy, build/two-lessons, where only that lesson is recorded (the seed's files are current),
# then committed: the TPU job's tests clone the copy, recordings included.
TWO_LESSONS := build/two-lessons
test-two-lessons: install browser java mpi
	$(call COPY_TREE,$(TWO_LESSONS))
	$(PY) -c 'import sys; sys.path[:0] = ["tests", "."]; from pathlib import Path; \
	    from harness import add_fixture_lesson; add_fixture_lesson(Path(sys.argv[1]))' \
	    $(TWO_LESSONS)
	$(call IN_COPY,$(TWO_LESSONS)) record
	$(call COMMIT_COPY,$(TWO_LESSONS),test-two-lessons)
	$(call PYTEST_IN,$(TWO_LESSONS),)

# The benchmarks' own tools, which `make install` leaves out: benchmarks/requirements.txt
# (mkdocs-jupyter, for docs_build.py's reference build) and benchmarks/package.json
# (Lighthouse CI). Each benchmark target installs them first.
$(VENV)/.benchmarks: $(VENV)/.installed benchmarks/requirements.txt constraints.txt
	$(UV_INSTALL) -r benchmarks/requirements.txt -c constraints.txt
	touch $@

benchmarks/node_modules/.installed: benchmarks/package.json benchmarks/package-lock.json
	cd benchmarks && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error
	touch $@

# Lighthouse CI on each lesson page against a bare theme page as long: a benchmark, not a
# test (scores are noisy on a busy machine). Writes benchmarks/scores.json; commit it from
# the default 24 rounds. A quick look: `make audit AUDIT_FLAGS=--rounds=6`.
AUDIT_FLAGS ?=
audit: build browser $(VENV)/.benchmarks benchmarks/node_modules/.installed
	$(PY) benchmarks/lighthouse.py $(AUDIT_FLAGS)

# The site's build against an mkdocs-jupyter build that executes the notebook, in turns.
docs-build: setup $(VENV)/.benchmarks
	$(PY) benchmarks/docs_build.py

clean:
	rm -rf site $(VENV) node_modules benchmarks/node_modules .pytest_cache
