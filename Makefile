PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# The record codec compiled with mypyc (optional: pure Python is used when it is absent).
ACCEL_SRC := kafkaio/records/varint.py kafkaio/records/record.py kafkaio/records/batch.py \
	kafkaio/records/builder.py kafkaio/consumer/record.py kafkaio/producer/murmur2.py
ACCEL_STAMP := build/.accel-stamp

.PHONY: install accel accel-clean kafka-jars demo test bench docs lint typecheck clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip "setuptools>=77" wheel
	$(PY) -m pip install --quiet -e '.[dev,spark]'
	touch $(STAMP)

install: $(STAMP)

$(ACCEL_STAMP): $(STAMP) $(ACCEL_SRC) setup.py
	@mkdir -p build
	@if KAFKAIO_COMPILE=1 $(PY) setup.py -q build_ext --inplace --force > build/accel.log 2>&1; then \
		echo "record codec accelerator built (mypyc)"; \
	else \
		rm -f kafkaio/*/*.so; \
		echo "note: record codec accelerator not built (see build/accel.log); using pure Python"; \
	fi
	@touch $(ACCEL_STAMP)

accel: $(ACCEL_STAMP)

accel-clean:
	rm -f kafkaio/*/*.so $(ACCEL_STAMP)

# Apache Kafka's jars for the tests, fetched by Maven into ~/.cache/kafkaio, and the broker's
# class-data-sharing archive (quicker broker starts); quick when cached. Without Java 17+ or
# Maven it says why and the Apache Kafka tests skip with that reason.
kafka-jars: $(STAMP)
	$(PY) -m kafkaio.testing fetch-kafka --if-possible

demo: $(ACCEL_STAMP)
	$(PY) -m kafkaio.demo

test: $(ACCEL_STAMP) kafka-jars
	$(PY) -m pytest -q

bench: $(ACCEL_STAMP)
	$(PY) -m benchmarks

docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict

lint: $(STAMP)
	$(PY) -m ruff check kafkaio tests benchmarks tools examples

typecheck: $(STAMP)
	$(PY) -m mypy

clean:
	rm -rf $(VENV) build site *.egg-info .pytest_cache .mypy_cache kafkaio/*/*.so
