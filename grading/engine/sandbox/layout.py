"""Where the sandbox's parts are, on the host and inside a run, and the commands it starts a run with."""

from __future__ import annotations

from pathlib import Path

BWRAP, SETPRIV, PRLIMIT, ENV = "/usr/bin/bwrap", "/usr/bin/setpriv", "/usr/bin/prlimit", "/usr/bin/env"

JUNIT_IN_SANDBOX = "/tmp/.takehome/junit.xml"

RUNNER_IN_SANDBOX = "/opt/runner"

SANDBOXED_IN_SANDBOX = "/opt/takehome"

# The first line our sh wrapper writes, before anything of the run's: a log that
# lacks it comes from a sandbox bwrap could not set up (see _execute).
STARTED_MARKER = "[takehome-sandbox: started]"

PROXY_SERVER = ("python", "-I", f"{SANDBOXED_IN_SANDBOX}/takehome_proxy_server.py")

WITNESS_MAX_BYTES = 8 << 20

LOCK_DIR = Path("/run/lock/takehome-sandbox")

# Replaces ``-m pytest``: pytest, its built-in plugins and what they import
# are loaded before the tree's folder goes on sys.path, so a candidate's
# ``pytest.py``, ``_pytest/``, ``pluggy/`` or ``xml/`` cannot stand in for
# them; the folder is then put first, as ``-m`` does, for the tree's own code.
# why the witness too: ``-p takehome_witness`` is imported after the folder is
# first on sys.path, and a takehome_witness.py in the upload replaced it (the
# run passed with no witness line at all). The canary plugin likewise.
PYTEST_BOOT = (
    "import importlib, os, sys\n"
    "import pytest\n"
    "from _pytest.config import default_plugins\n"
    "for _name in default_plugins:\n"
    "    try:\n"
    "        importlib.import_module('_pytest.' + _name)\n"
    "    except ImportError:\n"
    "        pass\n"
    "import takehome_witness\n"
    "import takehome_canary\n"
    "sys.path.insert(0, os.getcwd())\n"
    "sys.exit(int(pytest.main()))\n"
)
