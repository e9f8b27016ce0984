# streammkl — newcomer commands. Each target installs what it needs itself.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-dev

.PHONY: test test-slow lint install demo bench bench-river clean prometheus-tools java-runtime

$(PY):
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "need $(PYTHON) on PATH (or run: make PYTHON=python3 ...)"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

# After installing, the learner's numerical code is compiled once (numba, a few minutes on 2 cores,
# with a progress bar; cached beside the sources), so the first demo, daemon or river learner
# learns at once: the default classifier's, then the regressor's (dense and bag-of-words records).
$(STAMP): pyproject.toml | $(PY)
	$(PY) -m pip install -q -e '.[dev]'
	$(VENV)/bin/streammkl warmup
	STREAMMKL_LEARNER__TASK=regression $(VENV)/bin/streammkl warmup
	@touch $(STAMP)

install: $(STAMP)

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports
	$(VENV)/bin/mypy streammkl simulators

# Prometheus + promtool (Debian package) for the deploy checks; a no-op when both are installed.
prometheus-tools:
	bash deploy/install-prometheus.sh

# A Java runtime (Debian package) for MOA's learners (CapyMOA, the `moa` extra, in dev): the river
# suite's MOA rows and their smoke test; a no-op when java is on PATH or JAVA_HOME is set.
java-runtime:
	bash benchmarks/install-java.sh

# The whole suite, as CI runs it: lint, import direction, tests (slow soak tests excluded).
# One BLAS thread per pytest worker: two workers on two cores, no oversubscription.
test: lint prometheus-tools java-runtime
	OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 $(PY) -m pytest -n 2 --dist loadgroup -m "not slow" -q --durations=15

test-slow: $(STAMP)
	$(PY) -m pytest -m slow -q

# The README's first command: creates the venv, installs (and compiles once), then runs the live demo (embedded broker,
# simulator, daemon, metrics). Bounded (60 s by default); Ctrl-C ends it cleanly.
# Options: make demo DEMO_ARGS="--duration 30 --scenario bananas --rate 2000"
demo: $(STAMP)
	$(VENV)/bin/streammkl demo $(DEMO_ARGS)

bench: $(STAMP)
	$(PY) benchmarks/core_update.py

# The river suite's documented run (streammkl vs river, MOA through CapyMOA, VW; ~1.5 h on 2
# quiet cores): writes benchmarks/results/river_suite.md, then the README's table from it.
bench-river: $(STAMP) java-runtime
	$(PY) benchmarks/river_suite.py
	$(PY) benchmarks/readme_tables.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .ruff_cache .mypy_cache
