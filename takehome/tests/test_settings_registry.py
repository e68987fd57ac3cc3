"""Every variable the settings read is declared once, and the docs' table and .env.example agree with the declarations.

The settings read the environment only through `env` (shared/settings_env.py),
which records each variable in a registry; docs/settings.md gets its table from
that registry (docs/hooks/settings_table.py). These tests fail when a read goes
around the reader (so the docs would miss it), when the table misses a name, and
when .env.example names a variable nobody declares or leaves one out.
"""

import ast
import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from shared.settings_env import render_table

ROOT = Path(__file__).resolve().parents[2]
SETTINGS = ROOT / "takehome" / "settings.py"

# Run in a child: every keyed read of os.environ (get, [], in, os.getenv) while
# takehome/settings.py is on the stack is recorded with the innermost file of the
# checkout that made it. A read made anywhere but in the reader went around it.
TRACE = r"""
import json, os, sys
ROOT = os.getcwd()
reads = []
real_getitem = os._Environ.__getitem__

def traced(self, key):
    frame, settings_on_stack, nearest = sys._getframe(1), False, None
    while frame is not None:
        name = frame.f_code.co_filename
        if not name.startswith("<"):
            path = os.path.realpath(name)
            if path.startswith(ROOT + os.sep) and "site-packages" not in path:
                relative = os.path.relpath(path, ROOT)
                nearest = nearest or relative
                settings_on_stack = settings_on_stack or relative == os.path.join("takehome", "settings.py")
        frame = frame.f_back
    if settings_on_stack:
        reads.append([key, nearest])
    return real_getitem(self, key)

os._Environ.__getitem__ = traced
import takehome.settings as settings
registry = settings.env.registry
print(json.dumps({"reads": reads, "declared": sorted(registry.names()),
                  "elsewhere": sorted(s.name for s in registry if s.read_by)}))
"""

READER = os.path.join("shared", "settings_env.py")


def traced_import(**env) -> dict:
    base = {k: v for k, v in os.environ.items() if k not in {"DEBUG", "SECRET_KEY", "DJANGO_ALLOW_ASYNC_UNSAFE"}}
    result = subprocess.run([sys.executable, "-c", TRACE], cwd=ROOT, env={**base, "TAKEHOME_ENV_FILE": "", **env},
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.splitlines()[-1])


@pytest.mark.parametrize("env", [
    {"DEBUG": "true"},
    {"DEBUG": "false", "SECRET_KEY": "k" * 50, "ALLOWED_HOSTS": "takehome.example.com"},
], ids=["development", "production"])
def test_the_settings_read_the_environment_only_through_the_reader(env):
    found = traced_import(**env)
    around = sorted({f"{name} (read in {where})" for name, where in found["reads"] if where != READER})
    assert not around, f"read around shared/settings_env.py, so missing from the docs: {around}"
    read = {name for name, _ in found["reads"]}
    assert read <= set(found["declared"]), "the reader read a variable it did not declare"
    # Each declaration reads its variable (a secret reads its NAME_FILE too), except those other programs read.
    assert set(found["declared"]) - read == set(found["elsewhere"])


def test_settings_py_has_no_other_way_into_the_environment():
    """The trace sees the reads of one run; this sees the branches that run did not take."""
    tree = ast.parse(SETTINGS.read_text())
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in {"environ", "getenv", "getenvb", "environb"}:
            found.append(f"line {node.lineno}: .{node.attr}")
        elif isinstance(node, ast.Import | ast.ImportFrom):
            modules = [node.module] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
            names = [a.name for a in node.names] if isinstance(node, ast.ImportFrom) else []
            if "environ" in modules or {"environ", "getenv", "dotenv_values"} & set(names):
                found.append(f"line {node.lineno}: imports {modules} {names}")
    assert not found, f"takehome/settings.py reads the environment around `env`: {found}"


def registry():
    from takehome import settings

    return settings.env.registry


def test_the_table_has_a_row_for_every_declared_variable():
    rows = [line for line in render_table(registry()).splitlines() if line.startswith("| `")]
    named = [name for row in rows for name in re.findall(r"`([A-Z][A-Z0-9_]*)`", row.split(" | ")[0])]
    assert len(rows) == len(registry())
    assert sorted(named) == sorted(registry().names())


def test_the_table_shows_nothing_of_this_machine():
    """Computed defaults are shown in words (`<TAKEHOME_VAR_DIR>/media`), never as this checkout's paths."""
    import socket

    from django.conf import settings

    table = render_table(registry())
    for local in (str(ROOT), str(settings.VAR_DIR), str(settings.SANDBOX_HOME)):
        assert local not in table
    assert f"`{socket.gethostname()}`" not in table


def test_every_declaration_says_what_it_does():
    for setting in registry():
        assert setting.doc.strip() and setting.doc.rstrip().endswith((".", ")")), setting.name
        assert setting.section, setting.name


def names_in_env_example() -> set[str]:
    return set(re.findall(r"^([A-Z][A-Z0-9_]*)=", (ROOT / ".env.example").read_text(), re.M))


def test_env_example_names_only_declared_variables():
    unknown = names_in_env_example() - registry().names()
    assert not unknown, f".env.example names {sorted(unknown)}, which nothing declares (shared/settings_env.py)"


def test_env_example_lists_every_declared_variable_meant_for_it():
    wanted = {name for s in registry() if s.in_env_example for name in s.names}
    missing = wanted - names_in_env_example()
    assert not missing, f"add {sorted(missing)} to .env.example (or declare them in_env_example=False)"
    unwanted = {name for s in registry() if not s.in_env_example for name in s.names} & names_in_env_example()
    assert not unwanted, f"{sorted(unwanted)} have no effect in a .env file: leave them out of .env.example"


# The keywords each numeric or word reader takes from a declaration, to read a value the same way again.
READ_AGAIN = {"int": ("unit", "least"), "float": ("least", "above"), "duration": ("unit", "least", "above"),
              "bool": (), "choice": ()}


def test_the_numbers_and_words_in_env_example_are_the_defaults():
    """.env.example says it lists each setting with its default: for a number, a boolean or a choice, it does."""
    from shared.settings_env import Env

    example = dict(re.findall(r"^([A-Z][A-Z0-9_]*)=(.*)$", (ROOT / ".env.example").read_text(), re.M))
    by_name = {setting.name: setting for setting in registry()}
    checked = 0
    for name, value in example.items():
        setting = by_name.get(name)
        if setting is None or not value or setting.kind not in READ_AGAIN:
            continue
        reader = Env({name: value})
        reader.debug = False  # .env.example is for production
        spec = {key: getattr(setting, key) for key in READ_AGAIN[setting.kind]}
        args = (setting.choices,) if setting.kind == "choice" else ()
        got = getattr(reader, setting.kind)(name, setting.default, *args, doc=setting.doc, **spec)
        assert got == setting.default, f".env.example gives {name}={value}; its default is {setting.default}"
        checked += 1
    assert checked > 40


def test_a_copy_of_env_example_starts(tmp_path):
    """What a deployment starts from: .env.example as the env file, with a key (and a folder of this test's)."""
    base = {k: v for k, v in os.environ.items() if k not in {"DEBUG", "SECRET_KEY", "DJANGO_ALLOW_ASYNC_UNSAFE"}}
    env = {**base, "TAKEHOME_ENV_FILE": str(ROOT / ".env.example"), "SECRET_KEY": "k" * 50,
           "TAKEHOME_VAR_DIR": str(tmp_path)}
    result = subprocess.run([sys.executable, "-c", "import takehome.settings as s; print(s.DEBUG, s.SITE_URL)"],
                            cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["False", "https://takehome.example.com"]


def load_hook():
    spec = importlib.util.spec_from_file_location("settings_table_hook", ROOT / "docs" / "hooks" / "settings_table.py")
    hook = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hook)
    return hook


def test_the_docs_hook_puts_the_table_where_the_marker_is():
    hook = load_hook()
    page = (ROOT / "docs" / "settings.md").read_text()
    assert hook.MARKER in page.splitlines()
    built = hook.on_page_markdown(page, page=None, config=None, files=None)
    assert hook.MARKER not in built and page.split(hook.MARKER)[0] in built
    # Built from a fresh import under a clean development environment: the same table as here.
    assert render_table(registry()).strip() in built


def test_the_docs_hook_leaves_other_pages_alone():
    page = "# Evidence\n\nNothing to replace.\n"
    assert load_hook().on_page_markdown(page, page=None, config=None, files=None) == page
