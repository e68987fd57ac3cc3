"""The app's requirements apart from what working on it needs: the production image installs
requirements.txt alone, so nothing only the tests, the benchmarks, the lint or the docs use is in it,
and everything the tests import from outside the project is declared somewhere."""

import ast
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ONLY_FOR_WORK = {"pytest", "pytest-django", "pytest-xdist", "playwright", "axe-playwright-python", "locust",
                 "factory-boy", "ruff", "import-linter", "mkdocs-material", "openai", "requests", "pyyaml",
                 "websocket-client", "moto", "authlib"}
# import name -> distribution, where they differ
DISTRIBUTION = {"yaml": "pyyaml", "factory": "factory-boy", "websocket": "websocket-client",
                "axe_playwright_python": "axe-playwright-python", "importlinter": "import-linter",
                "pytest_django": "pytest-django", "xdist": "pytest-xdist", "environ": "django-environ",
                "django_htmx": "django-htmx", "template_partials": "django-template-partials", "axes": "django-axes",
                "csp": "django-csp", "channels_redis": "channels-redis", "markdown": "markdown", "pygments": "pygments",
                "django": "django", "httpx": "httpx2", "markdown_it": "markdown-it-py", "storages": "django-storages",
                # installed with, and used through, a declared one
                "asgiref": "django", "kombu": "celery", "boto3": "django-storages", "botocore": "django-storages",
                "joserfc": "authlib"}


def names(path: Path) -> set[str]:
    """The distributions a requirements file installs, following its -r lines."""
    found = set()
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line.startswith("-r "):
            found |= names(path.parent / line[3:].strip())
        elif line:
            found.add(re.split(r"[\[=<>~ ]", line, maxsplit=1)[0].lower().replace("_", "-"))
    return found


def test_the_app_s_requirements_hold_nothing_only_work_on_it_needs():
    assert names(ROOT / "requirements.txt") & ONLY_FOR_WORK == set()
    assert ONLY_FOR_WORK <= names(ROOT / "requirements-dev.txt")
    assert names(ROOT / "requirements.txt") <= names(ROOT / "requirements-dev.txt")


def imported(files) -> set[str]:
    found = set()
    for path in files:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                found |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found.add(node.module.split(".")[0])
    return found


def test_every_package_the_tests_import_is_declared():
    ours = {p.name for p in ROOT.iterdir() if (p / "__init__.py").exists() or p.suffix == ".py"}
    # and modules the tests put on sys.path (the sandboxed side's, the bench's)
    ours |= {p.stem for p in ROOT.glob("**/*.py") if not {".venv", "var", "site"} & set(p.relative_to(ROOT).parts)}
    tests = [p for p in ROOT.glob("*/tests/**/*.py")] + [ROOT / "conftest.py"]
    outside = {name for name in imported(tests) - ours - set(sys.stdlib_module_names)
               if not name.startswith("_")}
    declared = names(ROOT / "requirements-dev.txt")
    missing = sorted(n for n in outside if DISTRIBUTION.get(n, n).lower().replace("_", "-") not in declared)
    assert missing == [], f"imported by the tests but declared in no requirements file: {missing}"
