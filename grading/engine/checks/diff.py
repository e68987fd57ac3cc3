"""What the candidate changed, file by file, against the original fixture.

Flags, in this order, each at most once:

- ``protected_changed:<path>`` / ``protected_removed:<path>``: a protected file
  (e.g. sample.csv) differs after line endings and a UTF-8 BOM are normalised,
  or is gone. A Windows checkout that only turned LF into CRLF is not a change:
  the file is listed as modified with a note, and not flagged.
- ``added:<path>`` / ``removed:<path>`` for other files.
- ``forbidden:<label>``: a packet pattern matches an *added* line (one whose
  text is on no line of the original file), outside ``artifacts/``, outside
  documentation (``.md``, ``.rst``) and, in Python, outside comments.
- ``conftest_hooks:<path>``: an added or changed Python file newly defines a
  pytest hook that can change how outcomes are reported; a conftest that
  rewrites reports must be visible.
- ``config_changed:<path>``: pytest's configuration (``pytest.ini``,
  ``.pytest.ini``, or ``tox.ini``/``setup.cfg``/``pyproject.toml`` mentioning
  pytest) was added, changed or removed: addopts, plugins, python_files.
- ``tampering:<path>``: an added or changed file, test files included, that
  reaches into the test runner or the interpreter (imports _pytest/pluggy or,
  outside test files, pytest; touches ``sys.modules``, builtins, ``os._exit``,
  ``atexit``, frames, tracing, ``ctypes``, the grader's witness...),
  or a file the interpreter or pytest loads by itself (``sitecustomize.py``,
  ``usercustomize.py``, ``*.pth``, ``*.dist-info/``, ``*.egg-info/``).
  The file entry's ``tampering`` list says what was found.
- ``shadowing:<path>``: a module or package at the tree's root named like a
  standard-library module or part of pytest (``pytest.py``, ``_pytest/``,
  ``csv.py``), which ``import`` would find first.

Caches (``.pytest_cache/``, ``__pycache__/``, ``*.pyc``, ``.DS_Store``) are
ignored, whatever the archive kept.
"""

from __future__ import annotations

import ast
import difflib
import io
import os
import re
import sys
import tokenize
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from grading.engine.spec import is_test_path

MAX_DIFF_CHARS = 200_000
MAX_DIFF_INPUT = 1_000_000  # bytes per side beyond which difflib is too slow
MAX_TOKENIZE_CHARS = 200_000
IGNORED_DIRS = {".pytest_cache", "__pycache__", ".git"}
IGNORED_SUFFIXES = (".pyc", ".pyo")
IGNORED_NAMES = {".DS_Store"}
DOC_SUFFIXES = (".md", ".rst")
REPORT_HOOKS = frozenset(
    {
        "pytest_runtest_makereport",
        "pytest_report_teststatus",
        "pytest_collection_modifyitems",
        "pytest_runtest_logreport",
        "pytest_terminal_summary",
        "pytest_sessionfinish",
        "pytest_runtest_protocol",
        "pytest_runtest_call",
        "pytest_pyfunc_call",
        "pytest_collectreport",
        "pytest_ignore_collect",
        "pytest_collect_file",
        "pytest_pycollect_makeitem",
        "pytest_runtestloop",
        "pytest_configure",
        "pytest_unconfigure",
        "pytest_assertrepr_compare",
        "pytest_runtest_setup",
        "pytest_exception_interact",
    }
)
CONFIG_NAMES = ("pytest.ini", ".pytest.ini", "tox.ini", "setup.cfg", "pyproject.toml")
RUNNER_MODULES = frozenset(
    {
        "pytest",
        "_pytest",
        "pluggy",
        "py",
        "iniconfig",
        "packaging",
        "pygments",
        "_distutils_hack",
        "setuptools",
        "pkg_resources",
        "pip",
    }
)
SHADOWABLE = frozenset(sys.stdlib_module_names) | RUNNER_MODULES
AUTOLOADED = ("sitecustomize.py", "usercustomize.py")
# Module imports and attribute chains by which imported code reaches the runner or the interpreter.
TAMPER_IMPORTS = frozenset(
    {
        "pytest",
        "_pytest",
        "pluggy",
        "builtins",
        "__builtin__",
        "ctypes",
        "atexit",
        "gc",
        "importlib",
        "site",
        "runpy",
        "faulthandler",
        "takehome_witness",
    }
)
# What a test file imports to be one: pytest's public API (``_pytest`` and the rest stay signs).
TEST_IMPORTS = frozenset({"pytest"})
TAMPER_ATTRS = frozenset(
    {
        "sys.modules",
        "sys.meta_path",
        "sys.path_hooks",
        "sys.settrace",
        "sys.setprofile",
        "sys._getframe",
        "sys.addaudithook",
        "sys.excepthook",
        "os._exit",
        "os.kill",
        "os.killpg",
        "inspect.currentframe",
        "inspect.stack",
        "inspect.getouterframes",
    }
)
TAMPER_NAMES = frozenset({"__builtins__", "__import__", "pytest_plugins"})
TAMPER_STRINGS = ("_pytest", "junit", "/tmp/.takehome", "PYTEST_", "TAKEHOME_")


@dataclass(frozen=True)
class FileDiff:
    path: str
    status: str  # 'modified' | 'added' | 'removed'
    diff: str
    is_test: bool
    binary: bool = False
    tampering: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        data = {
            "path": self.path,
            "status": self.status,
            "diff": self.diff,
            "is_test": self.is_test,
            "binary": self.binary,
        }
        if self.tampering:  # only where there is something to say
            data["tampering"] = list(self.tampering)
        return data


@dataclass(frozen=True)
class DiffReport:
    files: tuple[FileDiff, ...] = ()
    flags: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        return {"files": [f.to_dict() for f in self.files], "flags": list(self.flags)}


def _read_tree(tree: Path, exclude_prefixes: tuple[str, ...]) -> dict[str, Path]:
    root = Path(tree)
    found = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in IGNORED_DIRS]
        for name in filenames:
            path = Path(dirpath) / name
            rel = PurePosixPath(path.relative_to(root)).as_posix()
            if (
                name in IGNORED_NAMES
                or name.endswith(IGNORED_SUFFIXES)
                or path.is_symlink()
                or not path.is_file()
                or rel.startswith(exclude_prefixes)
            ):
                continue
            found[rel] = path
    return found


def _text(data: bytes) -> str | None:
    """Text with LF line ends and no BOM, or None for binary data."""
    if b"\0" in data:
        return None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return None
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _code_lines(path: str, text: str) -> list[str]:
    """The lines a pattern may match: Python without comments, docs not at all."""
    if path.endswith(DOC_SUFFIXES):
        return []
    lines = text.split("\n")
    # tokenize is slow (about 1 s per 600 KB): skip it when there is no comment
    # to remove, and on large files, where every line is checked as written.
    if not path.endswith(".py") or "#" not in text or len(text) > MAX_TOKENIZE_CHARS:
        return lines
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return lines  # unparsable: check every line rather than none
    for tok in reversed(tokens):  # cut from the right so columns stay valid
        if tok.type == tokenize.COMMENT:
            row, col = tok.start
            lines[row - 1] = lines[row - 1][:col]
    return lines


def _added_lines(path: str, old: str | None, new: str) -> list[str]:
    """Lines of ``new`` whose text (stripped) is on no line of ``old``.

    A line moved or re-indented is not new code; this also stays linear on a
    large file where difflib would crawl.
    """
    before = {line.strip() for line in _code_lines(path, old)} if old is not None else set()
    return [line for line in _code_lines(path, new) if line.strip() and line.strip() not in before]


def _hooks(text: str | None) -> set[str]:
    if text is None:
        return set()
    try:
        module = ast.parse(text)
    except (SyntaxError, ValueError):
        # Cannot parse: fall back on the names, so a hook cannot hide behind a syntax trick.
        return {h for h in REPORT_HOOKS if re.search(rf"\bdef\s+{h}\b", text)}
    return {
        n.name
        for n in ast.walk(module)
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name in REPORT_HOOKS
    }


def _dotted(node: ast.AST) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def _tamper_signs(text: str | None, test: bool = False) -> set[str]:
    """What in a Python source reaches into the test runner or the interpreter (see TAMPER_*).

    In a test file (``test``), importing pytest itself is what tests do, not a sign.
    """
    if text is None:
        return set()
    found = _signs(text)
    if test:
        found -= {f"{verb} {name}" for name in TEST_IMPORTS for verb in ("imports", "mentions")}
    return found


def _signs(text: str) -> set[str]:
    try:
        module = ast.parse(text)
    except (SyntaxError, ValueError):
        # Unparsable: fall back on the words, so a sign cannot hide behind a syntax trick.
        words = [*TAMPER_IMPORTS, *TAMPER_ATTRS, *TAMPER_NAMES, *TAMPER_STRINGS]
        return {f"mentions {w}" for w in words if re.search(rf"(?<![\w.]){re.escape(w)}(?!\w)", text)}
    found = set()
    for node in ast.walk(module):
        if isinstance(node, ast.Import):
            found |= {f"imports {a.name}" for a in node.names if a.name.split(".")[0] in TAMPER_IMPORTS}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            top = node.module.split(".")[0]
            if top in TAMPER_IMPORTS:
                found.add(f"imports {node.module}")
            if top in ("os", "sys", "inspect"):
                found |= {f"uses {top}.{a.name}" for a in node.names if f"{top}.{a.name}" in TAMPER_ATTRS}
        elif isinstance(node, ast.Attribute):
            dotted = _dotted(node)
            if dotted is not None and dotted in TAMPER_ATTRS:
                found.add(f"uses {dotted}")
        elif isinstance(node, ast.Name) and node.id in TAMPER_NAMES:
            found.add(f"uses {node.id}")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            found |= {f"mentions {w}" for w in TAMPER_STRINGS if w in node.value}
    return found


def _file_tampering(path: str, old: str | None, new: str | None, new_bytes: bytes | None) -> list[str]:
    """Why ``path`` (added or changed) could change how the reruns behave.

    Test files too: a test module runs in pytest's interpreter as a conftest
    does, and one that replaced pytest's runner for its own tests went unseen.
    """
    if new_bytes is None:
        return []
    parts = path.split("/")
    why = []
    if parts[-1] in AUTOLOADED:
        why.append(f"{parts[-1]} is imported by the interpreter at start-up")
    if parts[-1].endswith(".pth"):
        why.append(".pth files are executed by the interpreter's site module")
    if any(p.endswith((".dist-info", ".egg-info")) for p in parts[:-1]):
        why.append("package metadata: its entry points can load pytest plugins")
    if path.endswith(".py"):
        test = is_test_path(path)
        why += sorted(_tamper_signs(new, test) - _tamper_signs(old, test))
    return why


def _shadowed(path: str) -> str | None:
    """The module a root-level file or package would stand in for, if it shadows one."""
    top, _, rest = path.partition("/")
    if rest:  # a package: only a folder with __init__.py beats the real module
        name = top if rest == "__init__.py" else None
    else:
        stem, dot, suffix = top.partition(".")
        name = stem if dot and suffix.split(".")[-1] in ("py", "so", "pyd") else None
    return name if name in SHADOWABLE and name != "test" else None


def _is_pytest_config(path: str, text: str | None) -> bool:
    name = path.rpartition("/")[2]
    if name not in CONFIG_NAMES:
        return False
    return name in ("pytest.ini", ".pytest.ini") or text is None or "pytest" in text


def _unified(path: str, old: str | None, new: str | None, old_size: int, new_size: int) -> str:
    if max(old_size, new_size) > MAX_DIFF_INPUT:
        return f"file too large to diff ({old_size} -> {new_size} bytes)"
    a = (old or "").splitlines(keepends=True)
    b = (new or "").splitlines(keepends=True)
    text = "".join(
        difflib.unified_diff(
            a,
            b,
            fromfile="/dev/null" if old is None else f"a/{path}",
            tofile="/dev/null" if new is None else f"b/{path}",
        )
    )
    if len(text) > MAX_DIFF_CHARS:
        text = text[:MAX_DIFF_CHARS] + f"\n... diff truncated ({len(text) - MAX_DIFF_CHARS} more characters)\n"
    return text


def diff_trees(
    original: Mapping[str, bytes],
    tree: Path,
    *,
    protected_paths: Iterable[str],
    forbidden_patterns: Mapping[str, str],
    exclude_prefixes: tuple[str, ...] = ("artifacts/",),
) -> DiffReport:
    """Per-file unified diffs of ``tree`` against ``original``, and flags (see module docstring).

    Files are ordered test files first, then the rest, each group by path.
    Patterns are searched as written (case-sensitive), line by line.
    """
    protected = set(protected_paths)
    patterns = {label: re.compile(rx) for label, rx in forbidden_patterns.items()}
    current = _read_tree(tree, tuple(exclude_prefixes))
    originals = {p: d for p, d in original.items() if not p.startswith(tuple(exclude_prefixes))}
    files: list[FileDiff] = []
    flags: dict[str, list[str]] = {
        k: [] for k in ("protected", "added", "removed", "forbidden", "hooks", "config", "tampering", "shadowing")
    }
    forbidden_found: set[str] = set()

    for path in sorted(set(current) | set(originals)):
        old_bytes = originals.get(path)
        new_bytes = current[path].read_bytes() if path in current else None
        if old_bytes == new_bytes:
            continue
        status = "added" if old_bytes is None else "removed" if new_bytes is None else "modified"
        old = _text(old_bytes) if old_bytes is not None else None
        new = _text(new_bytes) if new_bytes is not None else None
        binary = (old_bytes is not None and old is None) or (new_bytes is not None and new is None)
        if binary:
            diff = "binary file changed" if status == "modified" else f"binary file {status}"
        elif status == "modified" and old == new:
            diff = "only line endings or a byte-order mark differ; the text is the same"
        else:
            diff = _unified(path, old, new, len(old_bytes or b""), len(new_bytes or b""))
        tampering = _file_tampering(path, old, new, new_bytes)
        files.append(FileDiff(path, status, diff, is_test_path(path), binary, tuple(tampering)))
        if _is_pytest_config(path, old) or _is_pytest_config(path, new):
            flags["config"].append(f"config_changed:{path}")
        if tampering:
            flags["tampering"].append(f"tampering:{path}")
        if new_bytes is not None and _shadowed(path):
            flags["shadowing"].append(f"shadowing:{path}")

        if path in protected:
            if status == "removed":
                flags["protected"].append(f"protected_removed:{path}")
            elif binary or old != new:
                flags["protected"].append(f"protected_changed:{path}")
        elif status in ("added", "removed"):
            flags[status].append(f"{status}:{path}")
        if new is None:
            continue
        for line in _added_lines(path, old, new):
            for label, rx in patterns.items():
                if rx.search(line):
                    forbidden_found.add(label)
        if path.endswith(".py") and _hooks(new) - _hooks(old):
            flags["hooks"].append(f"conftest_hooks:{path}")

    # Forbidden labels in the packet's own order, so the flags read the same every time.
    flags["forbidden"] = [f"forbidden:{label}" for label in patterns if label in forbidden_found]
    files.sort(key=lambda f: (not f.is_test, f.path))
    return DiffReport(files=tuple(files), flags=tuple(f for group in flags.values() for f in group))
