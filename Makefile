# takehome: two commands do all set-up.
#   make run    set up, then serve http://127.0.0.1:8000/ with a worker, beat and a private Redis,
#               under supervisord, which restarts whichever dies (scripts/run-supervised)
#   make test   set up, then run the whole test suite
#   make docs   build the documentation site (mkdocs.yml, docs/) into site/; make docs-serve serves it
# The set-up writes .env on its first run (scripts/dotenv.py: DEBUG=true, a generated development
# SECRET_KEY, TAKEHOME_PORT, SITE_URL, TAKEHOME_VAR_DIR), which manage.py, the worker and
# daphne read through the settings; it is never rewritten. The environment wins over it.
SHELL := /bin/bash
# The interpreter .venv is built from: Debian's /usr/bin/python3 when it is 3.11 or newer (the one the
# sandbox's runner is built from; Debian builds it with profile-guided optimisation, and it runs pure Python
# about a quarter faster than a default pyenv build), otherwise the python3 on PATH (docs/install.md).
PYTHON ?= $(shell /usr/bin/python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null \
            && echo /usr/bin/python3 || echo python3)
VENV := .venv
PY := $(VENV)/bin/python

# `make run PORT=8123` is `TAKEHOME_PORT=8123 make run`; the links (SITE_URL) follow the port.
ifeq ($(origin PORT),command line)
export TAKEHOME_PORT := $(PORT)
endif

.PHONY: run status test lint setup dotenv system venv runner db bench vendor docs docs-serve screenshots dev

# A port given to this make (PORT or TAKEHOME_PORT) carries SITE_URL with it, unless SITE_URL
# is set too; otherwise both come from .env. run-supervised says so loudly when they disagree.
ifdef TAKEHOME_PORT
run: export SITE_URL ?= http://127.0.0.1:$(TAKEHOME_PORT)
endif
run: setup
	@$(PY) manage.py seed_demo
	@scripts/run-supervised

# While make run runs: each program's state, pid and uptime, from supervisord (scripts/status).
status:
	@scripts/status

# The tests never read .env: they get what they need here and from their own fixtures.
test: SYSTEM_FLAGS = --browser
test: export DEBUG ?= true
test: export TAKEHOME_VAR_DIR ?= $(CURDIR)/var
# Bytecode is written (a shell that sets PYTHONDONTWRITEBYTECODE would have every test process, worker and
# server it starts compile the project again, and pytest rewrite every test module's asserts again), under var/.
test: export PYTHONDONTWRITEBYTECODE =
test: export PYTHONPYCACHEPREFIX = $(CURDIR)/var/pycache
# TEST_PROCESSES: pytest-xdist's workers (0 runs the suite in this process); on two cores most tests wait on a
# server, a browser or a sandbox, so four keep both busy. PYTEST_ARGS: more for pytest (-m services, -k NAME).
TEST_PROCESSES ?= 4
# make run's set-up, with the tools for working on the project installed while the sandbox's runner and the
# database are set up (two jobs: neither needs the other, and the tools' install only adds packages;
# -O keeps each one's output together).
test: dotenv system venv
	@$(MAKE) --no-print-directory -j2 -Otarget db dev
	@$(MAKE) --no-print-directory lint
	$(VENV)/bin/pytest -n $(TEST_PROCESSES) --dist worksteal $(PYTEST_ARGS)

setup: dotenv system venv runner db

# The pictures in docs/screenshots/ (shown by the README and the docs), taken afresh by the tests that take
# them; make test writes its own under var/screenshots/ and leaves these alone.
screenshots: SYSTEM_FLAGS = --browser
screenshots: export DEBUG ?= true
screenshots: export TAKEHOME_VAR_DIR ?= $(CURDIR)/var
screenshots: setup dev
	SCREENSHOTS_DIR=$(CURDIR)/docs/screenshots $(VENV)/bin/pytest -n $(TEST_PROCESSES) -q \
	  $$(grep -rl --include='test_*.py' 'screenshot(' takehome sessions_app grading api)

# The house's guards (see docs/contributing.md): ruff's lint (ruff.toml), and grading's core imports neither
# Django nor the apps, nor shared the recruiter or candidate side (.importlinter). grading's engine is also
# kept as `ruff format` writes it, and mypy checks its types (mypy.ini).
lint: dev
	$(VENV)/bin/ruff check --quiet
	$(VENV)/bin/ruff format --check --quiet grading/engine
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports --no-cache

dotenv:
	@$(PYTHON) scripts/dotenv.py write

system:
	@scripts/ensure-system $(SYSTEM_FLAGS)

# The app's requirements (what the production image installs), and for make test, make docs, make bench
# and make lint what they need beside them (requirements-dev.txt, which names requirements-docs.txt).
$(VENV)/.installed: requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q --disable-pip-version-check -r requirements.txt
	@touch $@

$(VENV)/.installed-dev: $(VENV)/.installed requirements-dev.txt requirements-docs.txt
	$(VENV)/bin/pip install -q --disable-pip-version-check -r requirements-dev.txt
	@touch $@

venv: $(VENV)/.installed

dev: $(VENV)/.installed-dev

# The sandbox's own minimal virtualenv (pinned pytest), built from Debian's python3.
runner: venv dotenv
	@$(PY) manage.py build_runner

db: venv dotenv runner
	@$(PY) manage.py migrate --noinput -v0
	@$(PY) manage.py load_sample_packet --all

# The documentation site: strict, so a broken link or anchor fails the build. docs-serve rebuilds on
# every change, on 127.0.0.1 only and clear of make run's 8000 (DOCS_PORT=N to move it).
DOCS_PORT ?= 8100
MKDOCS := NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs
docs: dev
	$(MKDOCS) build --strict --site-dir site

docs-serve: dev
	$(MKDOCS) serve --strict --dev-addr 127.0.0.1:$(DOCS_PORT)

bench: setup dev
	$(PY) bench/grading.py
	$(PY) bench/grading.py --packets
	$(PY) bench/pages.py
	$(PY) bench/similarity.py
	$(PY) bench/load.py
	$(PY) bench/sessions.py
	$(PY) bench/model_stream.py

# The browser libraries, pinned, copied from npm into static/vendor/ (committed; needs npm only here).
XTERM_VERSION := 6.0.0
XTERM_FIT_VERSION := 0.11.0
ASCIINEMA_PLAYER_VERSION := 3.18.0
CODEMIRROR_VERSION := 6.0.2
CODEMIRROR_PYTHON_VERSION := 6.2.1
ESBUILD_VERSION := 0.28.2
vendor:
	rm -rf static/vendor/xterm static/vendor/xterm-addon-fit static/vendor/asciinema-player static/vendor/codemirror
	scripts/vendor-npm @xterm/xterm@$(XTERM_VERSION) xterm lib/xterm.js css/xterm.css
	scripts/vendor-npm @xterm/addon-fit@$(XTERM_FIT_VERSION) xterm-addon-fit lib/addon-fit.js
	scripts/vendor-npm asciinema-player@$(ASCIINEMA_PLAYER_VERSION) asciinema-player dist/bundle/asciinema-player.min.js dist/bundle/asciinema-player.css
	scripts/vendor-codemirror $(CODEMIRROR_VERSION) $(CODEMIRROR_PYTHON_VERSION) $(ESBUILD_VERSION)
