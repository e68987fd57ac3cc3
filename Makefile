# takehome: two commands do all set-up.
#   make run    set up, then serve http://127.0.0.1:8000/ with a worker, beat and a private Redis,
#               under supervisord, which restarts whichever dies (scripts/run-supervised)
#   make test   set up, then run the whole test suite
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
export TAKEHOME_VAR_DIR ?= $(CURDIR)/var
export DEBUG ?= true

.PHONY: run status test lint setup system venv runner db bench

# The log-in line seed_demo prints names the port the web server listens on.
run: export TAKEHOME_PORT ?= 8000
run: export SITE_URL ?= http://127.0.0.1:$(TAKEHOME_PORT)
run: setup
	@$(PY) manage.py seed_demo
	@scripts/run-supervised

# While make run runs: each program's state, pid and uptime, from supervisord.
status:
	@$(VENV)/bin/supervisorctl -c scripts/supervisord.conf status

test: SYSTEM_FLAGS = --browser
test: setup lint
	$(VENV)/bin/pytest

# The house's guards (see CONTRIBUTING.md): grading's core imports neither Django nor the apps (.importlinter).
lint: venv
	$(VENV)/bin/lint-imports --no-cache

setup: system venv runner db

system:
	@scripts/ensure-system $(SYSTEM_FLAGS)

$(VENV)/.installed: requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q --disable-pip-version-check -r requirements.txt
	@touch $@

venv: $(VENV)/.installed

# The sandbox's own minimal virtualenv (pinned pytest), built from Debian's python3.
runner: venv
	@$(PY) manage.py build_runner

db: venv
	@mkdir -p $(TAKEHOME_VAR_DIR)
	@$(PY) manage.py migrate --noinput -v0
	@$(PY) manage.py load_sample_packet

bench: setup
	$(PY) bench/grading.py
	$(PY) bench/pages.py
	$(PY) bench/load.py
