PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: install demo test bench lint typecheck clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(PY) -m kafkaio.demo

test: $(STAMP)
	$(PY) -m pytest -q

bench: $(STAMP)
	$(PY) -m benchmarks

lint: $(STAMP)
	$(PY) -m ruff check kafkaio tests benchmarks tools

typecheck: $(STAMP)
	$(PY) -m mypy

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .mypy_cache
