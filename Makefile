# Two entry points for a fresh machine:
#   make demo   - installs scramjet into .venv and runs `scramjet demo`
#   make test   - installs scramjet with its test tools and runs lint, types and tests
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
# CPU build of torch for development and CI; the package itself accepts torch>=2.4.
# The "+cpu" label makes pip take the CPU wheel or fail, never a multi-GB CUDA build.
# Where no CPU wheel is on the local index, point TORCH_INDEX at one:
#   make test TORCH_INDEX=https://download.pytorch.org/whl/cpu
TORCH_PIN ?= torch==2.13.0+cpu
TORCH_INDEX ?=
PIP_TORCH := $(TORCH_PIN) $(if $(TORCH_INDEX),--extra-index-url $(TORCH_INDEX))
STAMP_RUN := $(VENV)/.installed-run
STAMP_DEV := $(VENV)/.installed-dev

.PHONY: demo test test-slow lint typecheck format bench bench-gpu install install-dev system-deps clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(STAMP_RUN): pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q $(PIP_TORCH)
	$(BIN)/pip install -q -e . $(PIP_TORCH)
	touch $@

$(STAMP_DEV): pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q $(PIP_TORCH)
	$(BIN)/pip install -q -e '.[dev]' $(PIP_TORCH)
	touch $@ $(STAMP_RUN)

install: $(STAMP_RUN)
install-dev: $(STAMP_DEV) system-deps

# Browser and terminal multiplexer used by the report and dashboard tests.
system-deps:
	@bash scripts/system-deps.sh

demo: install
	$(BIN)/scramjet demo

lint: $(STAMP_DEV)
	$(BIN)/ruff check src tests benchmarks examples
	$(BIN)/ruff format --check src tests benchmarks examples

format: $(STAMP_DEV)
	$(BIN)/ruff format src tests benchmarks examples
	$(BIN)/ruff check --fix src tests benchmarks examples

typecheck: $(STAMP_DEV)
	$(BIN)/mypy

# The default suite on TEST_WORKERS processes (pytest-xdist), then the tests that bound a
# wall-clock time (marked `serial`) alone, so that a busy neighbour cannot break their bounds.
# `--dist loadfile` keeps each test file on one process, so that a file's shared set-up (a
# module fixture: the docs blocks' runner, a reference training run) is made once.
TEST_WORKERS ?= 2
TEST_SELECT := not slow and not gpu

test: install-dev lint typecheck
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile -m "$(TEST_SELECT) and not serial"
	$(BIN)/python -m pytest -q -m "$(TEST_SELECT) and serial"

test-slow: install-dev
	$(BIN)/python -m pytest -q -m slow

bench: install-dev
	@for f in benchmarks/*.py; do echo "== $$f"; $(BIN)/python $$f || exit 1; done

# On a CUDA machine (TORCH_PIN set to a CUDA build): the gpu-marked tests, then the GPU
# benchmarks (docs/bench/gpu.md).
bench-gpu: install-dev
	$(BIN)/python -m pytest -q -m gpu
	$(BIN)/python benchmarks/accel_compile.py --skip-cpu
	$(BIN)/python benchmarks/trainer_overhead.py --device cuda --reps 11
	$(BIN)/python benchmarks/trainer_overhead.py --device cuda --reps 9 --steps 200 --hidden 4096 --batch 1024 --no-peers
	$(BIN)/python benchmarks/data_gpu_decode.py
	$(BIN)/python benchmarks/trainer_pack.py --model cnn  # the Trainer given a pack, model on the GPU
	$(BIN)/python benchmarks/data_pack.py --n 4096 --workers 8 --encodings jpeg --rounds 2  # many cores: pack's worker processes
	@for c in tf32_mlp tf32_cnn cuda_graphs; do $(BIN)/python benchmarks/accel_extras.py --quick --case $$c || exit 1; done

clean:
	rm -rf $(VENV) build dist src/*.egg-info .pytest_cache .mypy_cache .ruff_cache
