"""Who writes a model's fields, read from the source (ast): the guards that keep each lifecycle's writes in its
owner (grading/lifecycle.py, the Invitation's methods, sessions_app/hosted/workspaces.py).

A write is an ORM call that names a field (``update``, ``create``,
``get_or_create``, ``update_or_create``, ``bulk_create``, ``bulk_update``, with
``defaults=`` too), the model's constructor, ``save(update_fields=...)``,
``setattr(obj, "field", ...)`` and an assignment to ``obj.field``. Reads
(filter, exclude, Q, values), other calls' keywords (``JsonResponse(...,
status=409)``) and other classes' own ``self.status`` are not writes.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from dataclasses import dataclass

from conftest import ROOT

WRITE_CALLS = {"update", "create", "get_or_create", "update_or_create", "bulk_create", "bulk_update"}
APPS = ("takehome", "sessions_app", "grading", "shared")


@dataclass(frozen=True)
class Watched:
    """The fields of a model (or of models that share one lifecycle) that only their owner may write."""

    models: frozenset[str]  # the models' class names: their constructors, and the methods of those classes, write
    fields: frozenset[str]
    # Names a chain starts from that hold another model with fields of the same names
    # (a packet's self-check has a started_at of its own, a review a submitted_at).
    others: frozenset[str] = frozenset()


def _keys(node: ast.AST) -> set[str]:
    """Field names a value names: dict keys (defaults=) and strings in lists (update_fields=)."""
    if isinstance(node, ast.Dict):
        return {k.value for k in node.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)}
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        return {e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)}
    return set()


def _root(node: ast.AST) -> str:
    """The name a chain of attributes and calls starts from: PacketCheck.objects.filter(...).update -> PacketCheck."""
    while isinstance(node, (ast.Attribute, ast.Call, ast.Subscript)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return getattr(node, "id", "")


class _Finder(ast.NodeVisitor):
    def __init__(self, watched: Watched):
        self.watched = watched
        self.found: list[tuple[int, str]] = []
        self.classes: list[str] = []

    def _add(self, node: ast.AST, names: set[str]) -> None:
        self.found += [(node.lineno, name) for name in sorted(names & self.watched.fields)]

    def _other(self, node: ast.AST) -> bool:
        return _root(node) in self.watched.others

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self.classes.append(node.name)
        self.generic_visit(node)
        self.classes.pop()

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        keywords = {k.arg: k.value for k in node.keywords if k.arg}
        if name == "setattr" and len(node.args) > 1 and isinstance(node.args[1], ast.Constant):
            if not self._other(node.args[0]):
                self._add(node, {node.args[1].value})
        elif not self._other(func):
            if name in WRITE_CALLS or name in self.watched.models:
                self._add(node, set(keywords) | _keys(keywords.get("defaults")))
            if name == "save":
                self._add(node, _keys(keywords.get("update_fields")))
            if name == "bulk_update":
                self._add(node, _keys(keywords.get("fields", node.args[1] if len(node.args) > 1 else None)))
        self.generic_visit(node)

    def visit_Assign(self, node) -> None:
        for target in getattr(node, "targets", None) or [node.target]:
            for part in target.elts if isinstance(target, (ast.Tuple, ast.List)) else [target]:
                if isinstance(part, ast.Attribute) and not self._own(part) and not self._other(part.value):
                    self._add(part, {part.attr})
        self.generic_visit(node)

    visit_AugAssign = visit_AnnAssign = visit_Assign

    def _own(self, part: ast.Attribute) -> bool:
        """``self.status = ...`` in a class of its own (an exception, a dataclass): not the model's field."""
        inside = self.classes[-1] if self.classes else ""
        return isinstance(part.value, ast.Name) and part.value.id == "self" and inside not in self.watched.models


def field_writes(source: str, watched: Watched) -> list[tuple[int, str]]:
    """(line, field) for each write of a watched field in ``source``."""
    finder = _Finder(watched)
    finder.visit(ast.parse(source))
    return finder.found


def writes_outside(watched: Watched, owners: Mapping[str, frozenset[str]]) -> list[str]:
    """Each write of the watched fields in the apps' modules that ``owners`` (path -> the fields it may write)
    does not allow, as "path:line writes field".

    why not tests, bench or migrations: fixtures and benchmarks build rows in any
    state on purpose. why not grading/engine: it imports no Django (the import
    contracts), so it writes no row; its own Workspace is a plain dataclass.
    """
    found = []
    for app in APPS:
        for path in sorted((ROOT / app).rglob("*.py")):
            relative = path.relative_to(ROOT).as_posix()
            if "/tests/" in relative or "/migrations/" in relative or relative.startswith("grading/engine/"):
                continue
            found += [f"{relative}:{line} writes {name}" for line, name in field_writes(path.read_text(), watched)
                      if name not in owners.get(relative, ())]
    return found
