# Two commands: `make demo` and `make test`. Both set everything up on a fresh machine.
VENV := .venv
BIN := $(VENV)/bin
export TMPDIR := $(CURDIR)/build/tmp
STAMP := $(VENV)/.installed
SOURCES := pyproject.toml CMakeLists.txt $(shell find simulator -type f)

.PHONY: demo test lint lit pytest bench clean

$(STAMP): $(SOURCES)
	@mkdir -p $(TMPDIR)
	test -x $(BIN)/python || python3 -m venv $(VENV)
	$(BIN)/pip install -q torch==2.13.0 "scikit-build-core>=0.10" "nanobind>=2.0"
	$(BIN)/pip install -q --no-build-isolation -e '.[test,plot,ray,parquet]'
	touch $@

demo: $(STAMP)
	@mkdir -p $(TMPDIR)
	$(BIN)/fuseflow run examples/gcn_layer.py

lint: $(STAMP)
	$(BIN)/ruff check fuseflow tests benchmarks examples
	$(BIN)/ruff format --check fuseflow tests benchmarks examples

lit: $(STAMP)
	@mkdir -p $(TMPDIR)
	PATH=$(CURDIR)/$(BIN):$$PATH $(BIN)/lit -sv tests/lit

pytest: $(STAMP)
	@mkdir -p $(TMPDIR)
	$(BIN)/python -m pytest -q tests

test: lint lit pytest

bench: $(STAMP)
	$(BIN)/python benchmarks/sim_throughput.py

clean:
	rm -rf build $(VENV)
