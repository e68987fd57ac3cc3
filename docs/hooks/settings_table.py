"""mkdocs hook: replaces the line `<!-- settings-table -->` in a page with the settings table.

The table is rendered from the declarations takehome/settings.py makes through
shared/settings_env.py, so it lists exactly what the settings read. It is built
in a child process that imports the settings under a clean development
environment (DEBUG=true, no .env, a throw-away TAKEHOME_VAR_DIR): no database,
no secret, and nothing of the builder's own environment in the table. The child
runs the checkout's .venv/bin/python when there is one (mkdocs may be installed
elsewhere), else this Python.

mkdocs.yml:

    hooks:
      - docs/hooks/settings_table.py
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

MARKER = "<!-- settings-table -->"
ROOT = Path(__file__).resolve().parents[2]
RENDER = "import sys; from shared.settings_env import main; sys.exit(main(['takehome.settings']))"

try:
    from mkdocs.exceptions import PluginError
except ImportError:  # the tests import this hook without mkdocs
    PluginError = RuntimeError


def settings_table() -> str:
    """The Markdown table of every setting, from a fresh import of the settings."""
    venv_python = ROOT / ".venv" / "bin" / "python"
    python = str(venv_python) if venv_python.exists() else sys.executable
    with tempfile.TemporaryDirectory(prefix="settings-table-") as var_dir:
        keep = {name: os.environ[name] for name in ("PATH", "HOME", "LANG", "SYSTEMROOT") if name in os.environ}
        env = {**keep, "DEBUG": "true", "TAKEHOME_ENV_FILE": "", "TAKEHOME_VAR_DIR": var_dir}
        result = subprocess.run([python, "-c", RENDER], cwd=ROOT, env=env, capture_output=True, text=True,
                                timeout=120)
    if result.returncode != 0:
        raise PluginError(f"The settings table could not be built ({python}):\n{result.stderr.strip()}")
    return result.stdout.strip()


def on_page_markdown(markdown: str, page, config, files) -> str:
    """Put the table where the page has the marker line; other pages pass unchanged."""
    lines = markdown.splitlines()
    if MARKER not in (line.strip() for line in lines):
        return markdown
    table = settings_table()
    return "\n".join(table if line.strip() == MARKER else line for line in lines) + "\n"
