# Lesson 11 course kit. `make` sets up .venv and builds everything; `make test` runs every test; `make help`
# lists the targets. Run make from this folder (the repository root).
#
# Convention: every target in .PHONY has a one-line description in a `## ` comment at the end of its rule
# line (`name: prerequisites ## what it does`); `make help` prints them, and tests/system/test_makefile.py
# fails when a .PHONY target has none.
PY      := .venv/bin/python
CK      := $(PY) -m coursekit
STAMP   := .venv/.installed
SYSTEM  := src/coursekit/system.py
# LESSON=<id of course.yml>: branches, release, grade, check, report, export, lab, student-bundle and site (the
# preview) work on that lesson
# only; without it, on every lesson (grade, check, export, lab and student-bundle: the first lesson)
LESSON_ARG := $(if $(LESSON),--lesson $(LESSON))
# SYSTEM_FLAGS=--check: only look for the system packages, install nothing

.PHONY: all help setup system-setup system-figures system-test branches figures editor release grade check report \
        formgrader export demo demo-text site lab student-bundle test lint bench fuzz clean hub hub-stop test-hub

all: branches figures release site ## set up, then build branches, figures, the release and the site (the default)

help: ## list the targets, one line each
	@awk -F ':[^#]*## ' '/^[a-z][a-z -]*:.*## / {printf "  make %-16s %s\n", $$1, $$2}' $(firstword $(MAKEFILE_LIST))

# ---- system packages each stage needs (the list: NEEDS in src/coursekit/system.py): found, installed
# with apt-get as root, or make stops with one line naming them
system-setup: ## install the system packages every stage needs (apt-get, as root)
	python3 $(SYSTEM) setup $(SYSTEM_FLAGS)

system-figures: $(STAMP) ## the system packages the figures need
	$(PY) $(SYSTEM) figures $(SYSTEM_FLAGS)

system-test: $(STAMP) ## the system packages the tests need (Chromium, bubblewrap, PostgreSQL, ...)
	$(PY) $(SYSTEM) test $(SYSTEM_FLAGS)

# ---- set-up: a virtualenv with the pinned packages, and the npm packages the site serves offline.
# uv (pinned in requirements.txt; pip installs it and pip's own pin first) makes .venv hold exactly
# requirements.txt's pins, then the kit itself: about 8 s on a fresh clone against pip's 52 s (it downloads and
# unpacks in parallel), and a package dropped from the list leaves .venv too. uv reads no pip.conf: $(UV) runs
# it with pip's indexes (a mirror), find-links (a local torch wheel) and certificate. npm ci runs meanwhile.
# The kit's own code is compiled too (an editable install is not): with PYTHONDONTWRITEBYTECODE set, every
# process that imports it (graders, CLI runs, the test workers) would compile it again, 0.2 s of CPU each.
UV := $(PY) src/coursekit/pip_settings.py
$(STAMP): requirements.txt pyproject.toml package.json package-lock.json | system-setup
	test -x $(PY) || python3 -m venv .venv
	$(PY) -m pip install --quiet $$(grep -E '^(pip|uv)==' requirements.txt)
	npm ci --silent --no-audit --no-fund & npm=$$!; \
	$(UV) pip sync --quiet --compile-bytecode --python $(PY) requirements.txt \
	  && $(UV) pip install --quiet --python $(PY) --no-deps -e . ; pip=$$?; \
	wait $$npm && test $$pip = 0
	$(PY) -m compileall -q src tests
	touch $@

setup: $(STAMP) ## the virtualenv with the pinned packages and the npm packages

# ---- the runner's CodeMirror bundle (committed; tests/runner/test_editor_bundle.py rebuilds and compares)
editor: $(STAMP) ## rebuild the runner's CodeMirror bundle (committed)
	node assets/runner/build-editor.mjs

# ---- lesson source -> branches, figures, nbgrader
branches: $(STAMP) ## write exercises/, solutions/ and the nbgrader source from the lesson
	$(CK) branches $(LESSON_ARG)

figures: system-figures ## draw Figure 11-1 into assets/figs/
	$(PY) -m grpolab.figures --out-dir assets/figs

release: $(STAMP) branches ## the student version with nbgrader (build/release/)
	$(CK) release $(LESSON_ARG)

grade: $(STAMP) ## autograde SUBMISSIONS=<folder or .zip> [GRADE_ARGS=--dry-run|--regrade]
	$(CK) grade $(SUBMISSIONS) $(LESSON_ARG) $(GRADE_ARGS)

check: $(STAMP) ## a student's self-check of NOTEBOOK=<file.ipynb>
	$(CK) check $(NOTEBOOK) $(LESSON_ARG)

report: $(STAMP) ## the CSV and class report after manual grading
	$(CK) report $(LESSON_ARG)

PORT ?=  # make formgrader|hub PORT=8891: the port on 127.0.0.1 (default: 8890; course.yml hub: port)
PORT_ARG = $(if $(strip $(PORT)),--port $(strip $(PORT)))

formgrader: $(STAMP) ## nbgrader's formgrader on localhost for the written answers [PORT=8890]
	$(CK) formgrader $(PORT_ARG)

FORMAT ?= canvas
export: $(STAMP) ## grades for the LMS: ROSTER=path/to/roster.csv [FORMAT=canvas|moodle|csv]
	$(CK) export --format $(FORMAT) $(if $(ROSTER),--roster "$(ROSTER)") $(LESSON_ARG)

# ---- demo notebook (CPU defaults; see README for the GPU command): into build/demo/ (the notebook and
# figs/), the committed run untouched; COMMIT=1 replaces the committed run (lessons/ and assets/figs/)
demo: $(STAMP) ## re-run the demo into build/demo/; COMMIT=1 replaces the committed run
	$(CK) demo $(if $(filter 1,$(COMMIT)),--commit)

demo-text: $(STAMP) ## rewrite the demo's text from the committed assets/figs/demo_*.json, no training
	$(PY) -m grpolab.demo_refresh

# ---- site: Quarto when installed, otherwise the no-Quarto preview
site: $(STAMP) branches release ## the site with Quarto, or the no-Quarto preview
	$(CK) site $(LESSON_ARG)

# ---- students: the bundle (build/student/<slug>/ and .zip: notebook, self-check, offline site, 使用说明);
# `make lab` runs JupyterLab from that lesson's bundle, written outside this repository
student-bundle: $(STAMP) release ## the student bundle (build/student/<slug>/ and .zip)
	$(CK) bundle $(LESSON_ARG)

lab: $(STAMP) release ## JupyterLab on the student bundle, outside this repository
	$(CK) lab $(LESSON_ARG)

# ---- checks
# TEST_WORKERS=N: pytest-xdist workers (each module's tests, and the modules sharing a graded class or a served
# site, on one worker: tests/conftest.py); 4 by default: the suite is CPU-bound on 2 cores, and a fourth worker
# fills the waits on browsers, servers and kernels that three leave idle (fresh-clone pytest, same commit: 9 min
# 22 s with 4 against 10 min 17-22 s with 3); TEST_WORKERS=1: one process
TEST_WORKERS ?= 4
test: system-test ## lint, the trust boundary and every test [TEST_WORKERS=4]
	$(PY) -m ruff check src tests bench
	.venv/bin/lint-imports --config pyproject.toml  # the trust boundary: judge/ and records/ never import sandbox/
	$(PY) -m pytest -q $(if $(filter-out 0 1,$(TEST_WORKERS)),-n $(TEST_WORKERS) --dist loadgroup)

# ---- the submission fuzzer's long run (tests/grading/test_notebook_fuzz.py; `make test` runs a bounded one):
# FUZZ_EXAMPLES mutants through ingest and nbgrader's sanitising steps, FUZZ_BATCHES classes of FUZZ_BATCH
# mutants graded with kernels; a finding stops it with the mutant to add as an @example
FUZZ_EXAMPLES ?= 20000
FUZZ_BATCHES ?= 10
FUZZ_BATCH ?= 8
fuzz: system-test ## the submission fuzzer's long run (FUZZ_EXAMPLES=20000 mutants)
	FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) FUZZ_BATCHES=$(FUZZ_BATCHES) FUZZ_BATCH=$(FUZZ_BATCH) \
	  $(PY) -m pytest -q -s --timeout 0 -p no:cacheprovider tests/grading/test_notebook_fuzz.py

lint: $(STAMP) ## ruff and the import contract only
	$(PY) -m ruff check src tests bench
	.venv/bin/lint-imports --config pyproject.toml  # the trust boundary: judge/ and records/ never import sandbox/

bench: system-test ## every benchmark that applies here; the others are named with the reason
	$(PY) bench/run_all.py

# everything the kit writes that git ignores (tests/system/test_makefile.py compares with `git status
# --ignored`), but not the set-up (.venv, node_modules) nor the students' old copies in work/
clean: ## remove what the kit writes outside git (the gradebook too); keeps .venv, node_modules
	rm -rf build _site _site-solution .quarto _freeze .autograder-dry-run autograder/release autograder/submitted \
	       autograder/autograded autograder/feedback autograder/reports autograder/gradebook.db \
	       autograder/.ingest autograder/exchange .pytest_cache .ruff_cache .hypothesis
	find . \( -path ./.venv -o -path ./node_modules -o -path ./.git \) -prune -o \( -name __pycache__ \
	       -o -name .ipynb_checkpoints -o -name '*.quarto_ipynb' \) -prune -exec rm -rf {} +

# ---- a class on JupyterHub (docs/hub.md): Ctrl-C stops it; `make hub-stop` if it runs in the background
hub: $(STAMP) ## a class on JupyterHub on localhost (docs/hub.md); Ctrl-C stops it [PORT=]
	$(CK) hub start $(PORT_ARG)

hub-stop: $(STAMP) ## stop a hub started in the background
	$(CK) hub stop

test-hub: system-test ## the hub's tests (root, cgroups)
	$(PY) -m pytest -q tests/hub
