# Training Benchmark Reproducibility Kit — one-click targets.
# `make` (or `make help`) lists them; each target's `## ` comment is its help line.

SHELL := /bin/bash
.DEFAULT_GOAL := help

VENV        ?= .venv
VENV_PY     := $(VENV)/bin/python
VENV_STAMP  := $(VENV)/.setup-stamp
# the frameworks' own data readers for tests/test_convert.py (tensorflow-cpu, mxnet: numpy pins apart from .venv's)
READERS     := .venv-readers
READER_STAMPS := $(READERS)/tensorflow/.stamp $(READERS)/mxnet/.stamp
RUNS_DIR    ?= runs
# newest run directory (by modification time); override with `make report RUN=runs/<id>`
RUN         ?= $(shell ls -1dt $(RUNS_DIR)/*/ 2>/dev/null | head -n 1)
REPORT_ARGS ?=
# bench-overhead's models (each at its CPU preset, bench/harness_overhead.py); OVERHEAD_ARGS replaces the lot
OVERHEAD_MODELS ?= resnet50,se_resnext50,deeplabv3p,bert,transformer,cyclegan
RUNTIME     ?= native
# test files run in parallel (pytest-xdist; tests/conftest.py keeps a file, or files sharing Slurm, on one worker);
# one more worker than 2 cores: the tests that wait on Docker, Slurm and the SSH hosts leave a core to a third
TEST_WORKERS ?= 3
# the suite's ~1000 Python processes read the kit's compiled modules, not compile them each (a caller's
# PYTHONDONTWRITEBYTECODE would make every one compile what it imports); the frameworks' readers for test_convert
TEST_ENV    = PYTHONDONTWRITEBYTECODE= KIT_TF_PYTHON=$(CURDIR)/$(READERS)/tensorflow/bin/python \
              KIT_MXNET_PYTHON=$(CURDIR)/$(READERS)/mxnet/bin/python
IMAGES      ?= cpu
CLAIMS      ?= ../shared/fixtures/published-logs/expected.yaml
LINT_PATHS  := $(wildcard kit tests bench scripts data_prep fabfile.py)
# a local wheel folder (the CPU build of torch) when the machine has one
PIP_LOCAL_WHEELS := $(if $(wildcard /opt/wheels/*.whl),--find-links /opt/wheels)
DOCKERFILES := $(shell find docker -type f -name 'Dockerfile*' 2>/dev/null | sort)

.PHONY: help setup system-deps readers test test-profile lint report images bench-images bench-local bench-seed003 bench-v100 bench-a100 bench-h100 sweep-v100 sweep-a100 sweep-h100 bench-parse bench-report bench-scale bench-overhead bench-telemetry bench-openmp bench-loader bench-decode bench-fanout bench-convert gpu-check gpu-prep gpu-check-loader crosscheck bundle verify clean distclean check-venv

help: ## list the targets (this text)
	@echo "usage: make <target> [VAR=value]"
	@awk 'BEGIN {FS = ":[^#]*## "} /^[a-zA-Z0-9_][a-zA-Z0-9_ -]*:[^#]*## / {printf "  %-12s %s\n", $$1, $$2}' $(MAKEFILE_LIST)
	@echo "variables: RUN=<run dir> (report), REPORT_ARGS='--skip 1 ...', CLAIMS=<claims.yaml>, RUNTIME=native|docker, IMAGES='cpu paddle/v100 ...'"

setup: system-deps $(VENV_STAMP) ## create .venv (Python >= 3.11) from requirements.lock + kit; as root also apt packages
	@echo "setup: done. Try: $(VENV)/bin/kit formats   (or: make test)"

system-deps:
	@if [ "$$(id -u)" = 0 ]; then \
	  scripts/install_system_deps.sh; \
	else \
	  echo "setup: not root, so system packages are NOT installed. The tests need these Debian packages:"; \
	  echo "    $$(scripts/install_system_deps.sh --list)"; \
	  echo "  install them with:  sudo scripts/install_system_deps.sh"; \
	  echo "  (or: sudo apt-get install -y $$(scripts/install_system_deps.sh --list))"; \
	  echo "setup: continuing with the Python environment."; \
	fi

# Pick python3.11, else python3 if it is >= 3.11; (re)create the venv if it is missing or broken.
$(VENV_PY):
	@py=""; for cand in python3.11 python3; do \
	  p=$$(command -v $$cand 2>/dev/null) || continue; \
	  if "$$p" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then py=$$p; break; fi; \
	done; \
	if [ -z "$$py" ]; then \
	  echo "setup: need Python >= 3.11 (python3.11 or python3 on PATH); found none." >&2; \
	  echo "  Debian bookworm: sudo apt-get install -y python3 python3-venv" >&2; exit 1; \
	fi; \
	echo "setup: creating $(VENV) with $$py ($$("$$py" -c 'import platform; print(platform.python_version())'))"; \
	"$$py" -m venv --clear $(VENV)

$(VENV_STAMP): requirements.lock pyproject.toml | $(VENV_PY)
	$(VENV_PY) -m pip install --disable-pip-version-check $(PIP_LOCAL_WHEELS) -r requirements.lock
	$(VENV_PY) -m pip install --disable-pip-version-check --no-deps --no-build-isolation -e .
	@touch $@

check-venv:
	@[ -x $(VENV_PY) ] || { echo "no $(VENV): run 'make setup' first" >&2; exit 1; }

$(READERS)/%/.stamp: tests/readers/%.lock | $(VENV_PY)
	"$$($(VENV_PY) -c 'import sys; print(sys._base_executable)')" -m venv --clear $(READERS)/$*
	$(READERS)/$*/bin/python -m pip install --disable-pip-version-check -q -r $<
	@touch $@

readers: $(READER_STAMPS) ## the venvs with tensorflow-cpu and mxnet that read converted data back in the tests

test: check-venv $(READER_STAMPS) ## run the test suite (pytest; TEST_WORKERS files at a time, 0: one process)
	$(TEST_ENV) $(VENV_PY) -m pytest -q -n $(TEST_WORKERS) --durations=15

test-profile: check-venv $(READER_STAMPS) ## make test with each test's wall and CPU seconds recorded, then where the time went (bench/testprofile.py)
	rm -rf bench/out/test-profile && mkdir -p bench/out/test-profile
	pacct=; if [ "$$(id -u)" = 0 ] && command -v accton >/dev/null; then \
	  pacct=$(CURDIR)/bench/out/test-profile/pacct; : > $$pacct; accton $$pacct >/dev/null; \
	  trap 'accton off >/dev/null; exit 130' INT TERM; \
	  else echo "test-profile: no process accounting (needs root and accton, apt install acct): daemons' CPU not counted"; fi; \
	KIT_TEST_PROFILE_DIR=$(CURDIR)/bench/out/test-profile PYTHONPATH=$(CURDIR)/bench $(TEST_ENV) \
	  $(VENV_PY) -m pytest -q -n $(TEST_WORKERS) -p testprofile; status=$$?; \
	  if [ -n "$$pacct" ]; then accton off >/dev/null; fi; \
	  $(VENV_PY) bench/testprofile.py bench/out/test-profile $${pacct:+--pacct $$pacct}; exit $$status

lint: check-venv ## ruff on the Python code; hadolint on docker/**/Dockerfile*
	$(VENV)/bin/ruff check $(LINT_PATHS)
ifneq ($(DOCKERFILES),)
	$(VENV)/bin/hadolint $(DOCKERFILES)
else
	@echo "lint: no Dockerfiles under docker/ (hadolint not run)"
endif

report: check-venv ## tables/JSON/CSV/PNG for a run: RUN=runs/<id> (default: newest under runs/)
	@if [ -z "$(RUN)" ]; then \
	  echo "report: no run directory under $(RUNS_DIR)/; pass one: make report RUN=<dir>" >&2; exit 1; fi
	$(VENV)/bin/kit report $(RUN) $(REPORT_ARGS)

bench-v100 bench-a100 bench-h100: check-venv ## a GPU suite on hosts.yaml: 1-node cases on the first host, n-node on n hosts; DRY_RUN=1 prints the plan
	$(VENV)/bin/kit cluster --suite $(@:bench-%=%) --runs-dir $(RUNS_DIR) $(if $(HOSTS),--hosts-file $(HOSTS)) $(if $(DRY_RUN),--dry-run) $(if $(SCHEDULER),--scheduler $(SCHEDULER))

bench-local: check-venv ## real CPU benchmark on this host (Paddle vs PyTorch, ~10 min on 2 cores); RUNTIME=docker: in the cpu image
	$(VENV)/bin/kit bench --suite local --runs-dir $(RUNS_DIR) --runtime $(RUNTIME)

images: check-venv ## render --check the Dockerfiles, make the debootstrap base, build IMAGES (default: cpu)
	$(VENV)/bin/kit images render --check
	$(VENV)/bin/kit images base
	$(VENV)/bin/kit images build $(IMAGES)

bench-images: check-venv ## delivering a ~1 GB image to 3 SSH test hosts / to 1 (target <= 1.3); needs root
	$(VENV_PY) bench/image_delivery.py

bench-parse: check-venv ## benchmark the kit's own log parsing speed (bench/bench_parse.py)
	$(VENV_PY) bench/bench_parse.py

bench-report: check-venv ## report time and files opened for 10, 100 and 980 runs, and a whole bench's rewrites, paced or not
	$(VENV_PY) bench/report_growth.py

bench-scale: check-venv ## kit report/bundle/verify time + peak memory on a generated 16n8g v100 run (1/4, 1/2, full)
	$(VENV_PY) bench/scale.py $(SCALE_ARGS)

bench-overhead: check-venv ## harness / bare training loop throughput (target >= 0.99), interleaved runs, every model
	$(VENV_PY) bench/harness_overhead.py $(or $(OVERHEAD_ARGS),--models $(OVERHEAD_MODELS))

bench-telemetry: check-venv ## the GPU sampler's own cost to a run at the kit's rate, resolved beside ten samplers and scaled back (target <= 1%)
	$(VENV_PY) bench/sampler_overhead.py $(TELEMETRY_ARGS)

bench-openmp: check-venv ## a CPU run's images/s waiting passively (the kit's) and spinning (the default), idle and beside a busy process
	$(VENV_PY) bench/openmp_wait.py $(OPENMP_ARGS)

bench-loader: check-venv ## loader-only images/s: cpu loader on 1, 2, all cores; gpu and dali on a CUDA host (LOADER_ARGS)
	$(VENV_PY) bench/loader.py $(LOADER_ARGS)

bench-seed003: check-venv ## seed 003's five models on this CPU, Paddle vs PyTorch (6 min 18 s measured on an idle 2-core machine) + report
	$(VENV)/bin/kit bench --suite seed003 --runs-dir $(RUNS_DIR)

bench-decode: check-venv ## the gpu loader's design on a CPU, decode stood in by a GIL-free 11.6 ms: the call in the loader / alone (<= 1.1), 1 call a batch, Python calls per batch flat, a small-op thread not slowed (>= 0.97), what a thread wake-up costs it on this host and the decode process's CPU a batch (DECODE_ARGS)
	$(VENV_PY) bench/decode_overlap.py $(DECODE_ARGS)

sweep-v100 sweep-a100 sweep-h100: check-venv ## a GPU suite's 1-node cases on EVERY host of hosts.yaml at once (SCHEDULER=slurm: every node of its partition, or NODES=n1,n2); the fleet table names the slow hosts and why
	$(VENV)/bin/kit sweep --suite $(@:sweep-%=%) --runs-dir $(RUNS_DIR) $(if $(HOSTS),--hosts-file $(HOSTS)) $(if $(SCHEDULER),--scheduler $(SCHEDULER)) $(if $(NODES),--nodes $(NODES))

bench-fanout: check-venv ## check_env and a no-op launch on HOSTS (default 4) SSH test hosts / on 1 (target <= 1.3); needs root
	$(VENV_PY) bench/fanout.py --hosts $(or $(HOSTS),4)

bench-convert: check-venv ## data_prep/convert.py img/s per format vs a plain read (target <= 2x); staging 2 hosts / 1 (<= 1.3); root
	$(VENV_PY) bench/convert_bench.py $(CONVERT_ARGS)

gpu-check: ## one GPU, ~12 min: check-env, kit bench --suite gpu1 (3 repeats), bundle + verify, harness / torchvision yardstick
	bash bench/gpu_check.sh

gpu-prep: ## .whl/ (+ .models/: GPU_PREP_ARGS=--with-program) for a GPU box without network; checked, with all that travels vs 64 MiB
	$(or $(PYTHON),$(if $(wildcard $(VENV_PY)),$(VENV_PY),python3)) bench/gpu_prep.py $(GPU_PREP_ARGS)

gpu-check-loader: ## one GPU: ResNet50 AMP NHWC on real JPEGs (gpu and cpu loaders) / synthetic; target >= 0.90 (~5 min)
	$(or $(PYTHON),python3) bench/loader_gpu_check.py $(LOADER_CHECK_ARGS)

crosscheck: check-venv ## re-derive published figures from logs: CLAIMS=<claims.yaml>
	$(VENV)/bin/kit crosscheck $(CLAIMS)

bundle: check-venv ## auditor bundle of a run: RUN=runs/<id> (default: newest) [SIGN_KEY=~/.ssh/id_ed25519] [FORCE=1]
	@if [ -z "$(RUN)" ]; then echo "bundle: no run directory under $(RUNS_DIR)/; pass RUN=<dir>" >&2; exit 1; fi
	$(VENV)/bin/kit bundle $(RUN) $(if $(SIGN_KEY),--sign-key $(SIGN_KEY)) $(if $(FORCE),--force)

verify: check-venv ## check an auditor bundle: BUNDLE=<file.tar.gz> [ALLOWED_SIGNERS=<file>]
	@if [ -z "$(BUNDLE)" ]; then echo "verify: pass BUNDLE=<runs/<id>.bundle.tar.gz>" >&2; exit 1; fi
	$(VENV)/bin/kit verify $(BUNDLE) $(if $(ALLOWED_SIGNERS),--allowed-signers $(ALLOWED_SIGNERS))

clean: ## remove build outputs and caches (keeps .venv, runs/ and bench/out/)
	rm -rf build dist *.egg-info .pytest_cache .ruff_cache
	find . -path ./$(VENV) -prune -o -type d -name __pycache__ -prune -exec rm -rf {} +

distclean: clean ## clean, and also remove .venv
	rm -rf $(VENV)
