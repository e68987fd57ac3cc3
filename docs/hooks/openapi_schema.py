"""mkdocs hook: the API's OpenAPI schema, from the code, in the site.

The schema is what the app serves at /api/v1/openapi.json (api/endpoints.py, django-ninja), built in a
child process that imports the project under a clean development environment, as the settings table is
(docs/hooks/settings_table.py). It is added to the site as `openapi.json`, and the line
`<!-- api-endpoints -->` of a page becomes the table of its endpoints (method, path, scope, what each does).

mkdocs.yml:

    hooks:
      - docs/hooks/openapi_schema.py
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from functools import lru_cache
from pathlib import Path

MARKER = "<!-- api-endpoints -->"
ROOT = Path(__file__).resolve().parents[2]
RENDER = ("import json, django; django.setup(); from api.endpoints import api; "
          "print(json.dumps(api.get_openapi_schema(), indent=2, sort_keys=True))")

try:
    from mkdocs.exceptions import PluginError
    from mkdocs.structure.files import File
except ImportError:  # the tests import this hook without mkdocs
    PluginError = RuntimeError  # type: ignore[misc,assignment]


@lru_cache(maxsize=1)
def schema_text() -> str:
    """The schema as the app serves it, from a fresh import of the project."""
    venv_python = ROOT / ".venv" / "bin" / "python"
    python = str(venv_python) if venv_python.exists() else sys.executable
    with tempfile.TemporaryDirectory(prefix="openapi-schema-") as var_dir:
        keep = {name: os.environ[name] for name in ("PATH", "HOME", "LANG", "SYSTEMROOT") if name in os.environ}
        env = {**keep, "DEBUG": "true", "TAKEHOME_ENV_FILE": "", "TAKEHOME_VAR_DIR": var_dir,
               "DJANGO_SETTINGS_MODULE": "takehome.settings"}
        result = subprocess.run([python, "-c", RENDER], cwd=ROOT, env=env, capture_output=True, text=True,
                                timeout=120)
    if result.returncode != 0:
        raise PluginError(f"The API's schema could not be built ({python}):\n{result.stderr.strip()}")
    return result.stdout


def endpoints_table(schema: dict) -> str:
    """One row per operation: method and path, the scope a token needs (reads: read), what it does."""
    rows = ["| method and path | scope | what it does |", "|---|---|---|"]
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            words = " ".join(operation.get("description", operation.get("summary", "")).split())
            scope = "read" if method == "get" else "write"
            rows.append(f"| `{method.upper()} {path}` | {scope} | {words.replace('|', '/')} |")
    return "\n".join(rows)


def on_files(files, config):
    files.append(File.generated(config, "openapi.json", content=schema_text()))
    return files


def on_page_markdown(markdown: str, page, config, files) -> str:
    lines = markdown.splitlines()
    if MARKER not in (line.strip() for line in lines):
        return markdown
    table = endpoints_table(json.loads(schema_text()))
    return "\n".join(table if line.strip() == MARKER else line for line in lines) + "\n"
