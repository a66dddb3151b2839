PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# The modules compiled with mypyc (optional: pure Python is used when they are absent), as
# listed in kafkaio/_accel_modules.py, which setup.py and the tests read too.
ACCEL_LIST := kafkaio/_accel_modules.py
ACCEL_SRC := $(shell $(PYTHON) -I $(ACCEL_LIST))
ifeq ($(strip $(ACCEL_SRC)),)
$(error cannot list the compiled modules: '$(PYTHON) -I $(ACCEL_LIST)' printed nothing)
endif
ACCEL_STAMP := build/.accel-stamp
# The Schema Registry the tests use: Apicurio Registry, built by Maven from a pom in the repo
# into a cache outside the work tree (skipped, and its tests with it, without Java and Maven).
REGISTRY_VERSION := $(shell sed -n 's:.*<apicurio.version>\(.*\)</apicurio.version>.*:\1:p' tools/schema-registry/pom.xml)
REGISTRY_JAR := $(HOME)/.cache/kafkaio/apicurio-registry-$(REGISTRY_VERSION)/kafkaio-schema-registry-1-runner.jar

.PHONY: install accel accel-clean kafka-jars spark-jars demo test bench docs lint typecheck dist \
	wheels-check clean schema-registry

# The editable install stays pure Python (KAFKAIO_PURE_PYTHON): `make accel` compiles in place.
$(STAMP): pyproject.toml setup.py
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip "setuptools>=77" wheel
	KAFKAIO_PURE_PYTHON=1 $(PY) -m pip install --quiet -e '.[dev,spark]'
	touch $(STAMP)

install: $(STAMP)

# Every extension is removed first: one left from a module taken off the list would shadow
# its .py.
$(ACCEL_STAMP): $(STAMP) $(ACCEL_SRC) $(ACCEL_LIST) setup.py
	@mkdir -p build
	@find kafkaio -name "*.so" -delete
	@if KAFKAIO_COMPILE=1 $(PY) setup.py -q build_ext --inplace --force > build/accel.log 2>&1; then \
		echo "record codec accelerator built (mypyc)"; \
	else \
		find kafkaio -name "*.so" -delete; \
		echo "note: record codec accelerator not built (see build/accel.log); using pure Python"; \
	fi
	@touch $(ACCEL_STAMP)

accel: $(ACCEL_STAMP)

accel-clean:
	find kafkaio -name "*.so" -delete
	rm -f $(ACCEL_STAMP)

# Apache Kafka's jars for the tests, fetched by Maven into ~/.cache/kafkaio, and the broker's
# class-data-sharing archive (quicker broker starts); quick when cached. Without Java 17+ or
# Maven it says why and the Apache Kafka tests skip with that reason.
kafka-jars: $(STAMP)
	$(PY) -m kafkaio.testing fetch-kafka --if-possible

# Spark's own Kafka connector for the installed PySpark (the Spark benchmark and parity tests
# compare format("kafkaio") with it), fetched by Maven into ~/.cache/kafkaio; skipped with the
# reason when Java or Maven is missing.
spark-jars: $(STAMP)
	$(PY) -m kafkaio.testing fetch-spark-kafka --if-possible

demo: $(ACCEL_STAMP)
	$(PY) -m kafkaio.demo

$(REGISTRY_JAR): tools/schema-registry/pom.xml $(wildcard tools/schema-registry/src/main/java/*/*/*/*/*.java)
	@if command -v mvn >/dev/null && command -v java >/dev/null; then \
		echo "building Apicurio Registry $(REGISTRY_VERSION) for the Schema Registry tests (Maven)"; \
		mvn -B -q -f tools/schema-registry/pom.xml package > build/schema-registry.log 2>&1 \
			|| { echo "note: the registry did not build (see build/schema-registry.log); its tests skip"; }; \
	else \
		echo "note: Java or Maven is missing: the Schema Registry tests skip"; \
	fi

schema-registry:
	@mkdir -p build
	@$(MAKE) --no-print-directory $(REGISTRY_JAR)

test: $(ACCEL_STAMP) kafka-jars spark-jars schema-registry
	$(PY) -m pytest -q

bench: $(ACCEL_STAMP) kafka-jars spark-jars
	$(PY) -m benchmarks

docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict

# sdist and wheel as a release builds them (the wheel compiled with mypyc when a C compiler is
# here), into dist/
dist: $(STAMP)
	$(PY) -m build --outdir dist .

# Build a wheel for every CPython 3.10-3.13 found (pyenv), install each into a fresh venv
# with no extras and run the unit tests there (see docs/releasing.md)
wheels-check: $(STAMP)
	$(PY) tools/check_wheels.py

lint: $(STAMP)
	$(PY) -m ruff check kafkaio tests benchmarks tools examples

typecheck: $(STAMP)
	$(PY) -m mypy

clean:
	rm -rf $(VENV) build dist site *.egg-info .pytest_cache .mypy_cache
	find kafkaio -name "*.so" -delete
