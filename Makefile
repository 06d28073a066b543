# All set-up is here: `make demo` and `make test` work on a fresh machine with Rust and Python 3.11+.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
export VIRTUAL_ENV := $(abspath $(VENV))
# Python files are installed editable; only the Rust core and the metadata need a rebuild.
SOURCES := Cargo.toml pyproject.toml $(shell find src -name '*.rs' 2>/dev/null)
# One list of dependencies, pyproject.toml's: its core dependencies, or those of an extra.
REQUIREMENTS = $$($(PY) tools/requirements.py $(1))

.PHONY: demo test dev bench wheel-check clean

# The oldest Python polytok supports: pyproject.toml's requires-python and the README say the same.
MIN_PYTHON := 3.11

$(VENV)/.deps: pyproject.toml
	@$(PYTHON) -c 'import sys; v = tuple(map(int, "$(MIN_PYTHON)".split("."))); \
	  sys.exit(f"polytok needs Python $(MIN_PYTHON)+; $(PYTHON) is {sys.version.split()[0]} (make PYTHON=python3.11)" if sys.version_info < v else 0)'
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip maturin
	$(PY) -m pip install -q $(call REQUIREMENTS)
	touch $@

# The HTML report test renders in headless Chromium (Debian's package); installed when we can.
$(VENV)/.test-deps: $(VENV)/.deps
	$(PY) -m pip install -q $(call REQUIREMENTS,test)
	command -v chromium >/dev/null || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; } || \
	  echo "note: chromium not installed; the report rendering test will be skipped"
	touch $@

$(VENV)/.built: $(VENV)/.deps $(SOURCES)
	$(VENV)/bin/maturin develop --release -q >/dev/null
	touch $@

dev: $(VENV)/.built $(VENV)/.test-deps

demo: $(VENV)/.built
	$(PY) -m polytok.demo

# The Rust unit tests link against libpython (the Python module build adds pyo3's
# extension-module feature itself, from pyproject.toml), with the venv's Python.
test: $(VENV)/.built $(VENV)/.test-deps
	PYO3_PYTHON=$(abspath $(PY)) cargo test --lib --quiet
	$(PY) -m pytest tests

bench: $(VENV)/.built $(VENV)/.test-deps
	$(PY) -m pip install -q $(call REQUIREMENTS,bench)
	$(PY) benchmarks/bench_train.py
	$(PY) benchmarks/bench_encode.py

# The built wheel in a bare venv with only its core dependencies: what `pip install polytok` gives.
wheel-check: $(VENV)/.deps
	$(VENV)/bin/maturin build --release -q -o dist
	bash tools/check_wheel.sh dist

clean:
	rm -rf $(VENV) target
