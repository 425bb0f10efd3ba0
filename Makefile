# Lesson 11 course kit. `make` sets up .venv and builds everything; `make test` runs every test.
PY      := .venv/bin/python
CK      := $(PY) -m coursekit
STAMP   := .venv/.installed
SYSTEM  := src/coursekit/system.py
# LESSON=<id of course.yml>: branches, release, grade, check, report, export, lab, student-bundle and site (the
# preview) work on that lesson
# only; without it, on every lesson (grade, check, export, lab and student-bundle: the first lesson)
LESSON_ARG := $(if $(LESSON),--lesson $(LESSON))
# SYSTEM_FLAGS=--check: only look for the system packages, install nothing

.PHONY: all setup system-setup system-figures system-test branches figures editor release grade check report \
        formgrader export demo demo-text site lab student-bundle test lint bench fuzz clean hub hub-stop test-hub

all: branches figures release site

# ---- system packages each stage needs (the list: NEEDS in src/coursekit/system.py): found, installed
# with apt-get as root, or make stops with one line naming them
system-setup:
	python3 $(SYSTEM) setup $(SYSTEM_FLAGS)

system-figures system-test: $(STAMP)
	$(PY) $(SYSTEM) $(@:system-%=%) $(SYSTEM_FLAGS)

# ---- set-up: a virtualenv with the pinned packages, and the npm packages the site serves offline
$(STAMP): requirements.txt pyproject.toml package.json package-lock.json | system-setup
	test -x $(PY) || python3 -m venv .venv
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt
	$(PY) -m pip install --quiet --no-deps -e .
	npm ci --silent --no-audit --no-fund
	touch $@

setup: $(STAMP)

# ---- the runner's CodeMirror bundle (committed; tests/runner/test_editor_bundle.py rebuilds and compares)
editor: $(STAMP)
	node assets/runner/build-editor.mjs

# ---- lesson source -> branches, figures, nbgrader
branches: $(STAMP)
	$(CK) branches $(LESSON_ARG)

figures: system-figures
	$(PY) -m grpolab.figures --out-dir assets/figs

release: $(STAMP) branches
	$(CK) release $(LESSON_ARG)

grade: $(STAMP)
	$(CK) grade $(SUBMISSIONS) $(LESSON_ARG) $(GRADE_ARGS)

check: $(STAMP)
	$(CK) check $(NOTEBOOK) $(LESSON_ARG)

report: $(STAMP)
	$(CK) report $(LESSON_ARG)

PORT ?=  # make formgrader|hub PORT=8891: the port on 127.0.0.1 (default: 8890; course.yml hub: port)
PORT_ARG = $(if $(strip $(PORT)),--port $(strip $(PORT)))

formgrader: $(STAMP)
	$(CK) formgrader $(PORT_ARG)

FORMAT ?= canvas
export: $(STAMP)
	$(CK) export --format $(FORMAT) --roster "$(ROSTER)" $(LESSON_ARG)

# ---- demo notebook (CPU defaults; see README for the GPU command)
demo: $(STAMP)
	$(PY) -m papermill lessons/lesson11_grpo_demo.ipynb lessons/lesson11_grpo_demo.ipynb --cwd lessons

# the demo's text rewritten from the committed assets/figs/demo_*.json, without training again
demo-text: $(STAMP)
	$(PY) -m grpolab.demo_refresh

# ---- site: Quarto when installed, otherwise the no-Quarto preview
site: $(STAMP) branches release
	$(CK) site $(LESSON_ARG)

# ---- students: the bundle (build/student/<slug>/ and .zip: notebook, self-check, offline site, 使用说明);
# `make lab` runs JupyterLab from that lesson's bundle, written outside this repository
student-bundle: $(STAMP) release
	$(CK) bundle $(LESSON_ARG)

lab: $(STAMP) release
	$(CK) lab $(LESSON_ARG)

# ---- checks
test: system-test
	$(PY) -m ruff check src tests bench
	.venv/bin/lint-imports --config pyproject.toml  # the trust boundary: judge/ and records/ never import sandbox/
	$(PY) -m pytest -q

# ---- the submission fuzzer's long run (tests/grading/test_notebook_fuzz.py; `make test` runs a bounded one):
# FUZZ_EXAMPLES mutants through ingest and nbgrader's sanitising steps, FUZZ_BATCHES classes of FUZZ_BATCH
# mutants graded with kernels; a finding stops it with the mutant to add as an @example
FUZZ_EXAMPLES ?= 20000
FUZZ_BATCHES ?= 10
FUZZ_BATCH ?= 8
fuzz: system-test
	FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) FUZZ_BATCHES=$(FUZZ_BATCHES) FUZZ_BATCH=$(FUZZ_BATCH) \
	  $(PY) -m pytest -q -s --timeout 0 -p no:cacheprovider tests/grading/test_notebook_fuzz.py

lint: $(STAMP)
	$(PY) -m ruff check src tests bench
	.venv/bin/lint-imports --config pyproject.toml  # the trust boundary: judge/ and records/ never import sandbox/

bench: system-test  # every bench that applies here; the ones that do not (exit 2) are named with the reason
	$(PY) bench/run_all.py

clean:
	rm -rf build _site _site-solution autograder/release autograder/submitted autograder/autograded \
	       autograder/feedback autograder/reports autograder/gradebook.db \
	       autograder/.ingest autograder/exchange build/release

# ---- a class on JupyterHub (docs/hub.md): Ctrl-C stops it; `make hub-stop` if it runs in the background
hub: $(STAMP)
	$(CK) hub start $(PORT_ARG)

hub-stop: $(STAMP)
	$(CK) hub stop

test-hub: system-test
	$(PY) -m pytest -q tests/hub
