# All set-up is here: `make demo` and `make test` work on a fresh machine with Rust and Python 3.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
export VIRTUAL_ENV := $(abspath $(VENV))
SOURCES := Cargo.toml pyproject.toml $(shell find src python -name '*.rs' -o -name '*.py' 2>/dev/null)

.PHONY: demo test dev bench clean

$(VENV)/.deps: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip maturin
	$(PY) -m pip install -q numpy scipy highspy tqdm
	touch $@

$(VENV)/.test-deps: $(VENV)/.deps
	$(PY) -m pip install -q pytest hypothesis regex tiktoken tokenizers sentencepiece pyarrow zstandard ortools matplotlib tokenization-scorer
	touch $@

$(VENV)/.built: $(VENV)/.deps $(SOURCES)
	$(VENV)/bin/maturin develop --release -q
	touch $@

dev: $(VENV)/.built $(VENV)/.test-deps

demo: $(VENV)/.built
	$(PY) -m polytok.demo

test: $(VENV)/.built $(VENV)/.test-deps
	$(PY) -m pytest tests

bench: $(VENV)/.built $(VENV)/.test-deps
	$(PY) -m pip install -q rustbpe
	$(PY) benchmarks/bench_train.py
	$(PY) benchmarks/bench_encode.py

clean:
	rm -rf $(VENV) target
