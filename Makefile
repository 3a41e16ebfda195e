# The two commands a newcomer runs: `make demo` and `make test` (see README.md).
VENV    ?= .venv
PY      := $(VENV)/bin/python
PIP     := $(VENV)/bin/pip
PORT    ?= 8000

# Test services on loopback; `scripts/test-services` installs and starts them
# (as root) or says in one line what is missing.
TEST_DATABASE_URL ?= postgres://portal:portal@127.0.0.1:5432/portal
TEST_REDIS_URL    ?= redis://127.0.0.1:6379/0

.PHONY: demo test lint venv clean services real-cluster-build real-cluster-up real-cluster-down

$(VENV)/.created:
	@PYTHON_BIN=$$(scripts/find-python) && echo "using $$PYTHON_BIN" && $$PYTHON_BIN -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip
	@touch $@

$(VENV)/.installed-app: $(VENV)/.created pyproject.toml constraints.txt
	$(PIP) install --quiet -c constraints.txt -e .
	@touch $@

$(VENV)/.installed-test: $(VENV)/.installed-app
	$(PIP) install --quiet -c constraints.txt -e '.[test]'
	@touch $@

venv: $(VENV)/.installed-test

demo: $(VENV)/.installed-app
	PORT=$(PORT) $(PY) manage.py demo

lint: $(VENV)/.installed-test
	$(VENV)/bin/ruff check .

services:
	@scripts/test-services

# The real tier's components (etcd, Kubernetes, Kueue, JobSet, KWOK) from pinned Go
# modules, into ~/.cache/gpu-quota-portal/realcluster (a second run builds nothing).
real-cluster-build: $(VENV)/.installed-app
	@command -v go >/dev/null 2>&1 || { echo "real-cluster-build: install the Go toolchain (1.25+; Debian: apt-get install golang-go)" >&2; exit 1; }
	$(PY) -m harness.realcluster build

# A real control plane on loopback for trying the portal by hand (see README).
real-cluster-up: real-cluster-build
	$(PY) -m harness.realcluster up

real-cluster-down:
	$(PY) -m harness.realcluster down

test: services $(VENV)/.installed-test lint real-cluster-build
	DATABASE_URL=$(TEST_DATABASE_URL) REDIS_URL=$(TEST_REDIS_URL) $(PY) -m pytest $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) var staticfiles .pytest_cache .ruff_cache
