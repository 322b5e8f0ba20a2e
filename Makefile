# Two commands: `make demo` and `make test`. Both set everything up on a fresh machine.
VENV := .venv
BIN := $(VENV)/bin
export TMPDIR := $(CURDIR)/build/tmp
STAMP := $(VENV)/.installed
SOURCES := pyproject.toml CMakeLists.txt $(shell find simulator -type f)

.PHONY: demo test lint lit pytest bench clean test-sanitize
# public classes, methods and functions carry docstrings (ruff D1), in every module
PUBLIC_API = fuseflow

$(STAMP): $(SOURCES)
	@mkdir -p $(TMPDIR)
	test -x $(BIN)/python || python3 -m venv $(VENV)
	$(BIN)/pip install -q torch==2.13.0 "scikit-build-core>=0.10" "nanobind>=2.0"
	$(BIN)/pip install -q --no-build-isolation -e '.[test,plot,ray,parquet,pyg]'
	touch $@

demo: $(STAMP)
	@mkdir -p $(TMPDIR)
	$(BIN)/fuseflow study examples/gcn_layer.py --schedules unfused,auto --arch amber --strategy concurrent

lint: $(STAMP)
	$(BIN)/ruff check fuseflow tests benchmarks examples
	$(BIN)/ruff format --check fuseflow tests benchmarks examples
	$(BIN)/ruff check --select D101,D102,D103 $(PUBLIC_API)
	$(BIN)/lint-imports
	$(BIN)/mypy

lit: $(STAMP)
	@mkdir -p $(TMPDIR)
	PATH=$(CURDIR)/$(BIN):$$PATH $(BIN)/lit -sv tests/lit

pytest: $(STAMP)
	@mkdir -p $(TMPDIR)
	FUSEFLOW_REQUIRE_EXTRAS=1 $(BIN)/python -m pytest -q -n auto tests

test: lint lit pytest

# The simulator built with ASan + UBSan (CMake option FUSEFLOW_SANITIZE) under the simulator,
# engine and kernel tests; the sanitizer runtimes are preloaded because Python is not instrumented.
SAN_DIR := build/sanitize
SAN_ENV := LD_PRELOAD=$$(gcc -print-file-name=libasan.so):$$(gcc -print-file-name=libubsan.so) \
	ASAN_OPTIONS=detect_leaks=0:halt_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1

test-sanitize: $(STAMP)
	@mkdir -p $(TMPDIR)
	cmake -S . -B $(SAN_DIR) -DFUSEFLOW_SANITIZE=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
		-DPython_EXECUTABLE=$(CURDIR)/$(BIN)/python > $(SAN_DIR).log
	cmake --build $(SAN_DIR) -j2 >> $(SAN_DIR).log
	$(SAN_ENV) $(BIN)/python tests/sanitize.py tests/unit/test_simulator.py tests/unit/test_presets.py \
		tests/unit/test_sam_ir.py tests/unit/test_builder_fuzz.py tests/e2e/test_engines.py tests/e2e/test_kernels.py \
		tests/e2e/test_fabric.py tests/e2e/test_strategies.py tests/e2e/test_spill.py::test_random_cases_do_spill \
		tests/e2e/test_spill.py::test_spilled_queues_reproduce_the_run_exactly \
		tests/e2e/test_spill.py::test_a_checkpoint_with_spilled_queues_continues_identically \
		tests/e2e/test_spill.py::test_a_spilled_queue_that_nears_its_depth_goes_back_to_memory_in_order

bench: $(STAMP)
	$(BIN)/python benchmarks/sim_throughput.py

clean:
	rm -rf build $(VENV)
