"""The hidden tests' side of the process boundary (runs in the trusted pytest process).

The packet's hidden tests run in a pytest process that never imports the
candidate's code. Each of the packet's production modules is replaced, in
that process's tree, by a generated stand-in::

    import takehome_proxy as _proxy
    __getattr__, __dir__ = _proxy.module_hooks(__name__)

so ``import invoices; invoices.total(path)`` sends the call, as plain data
(``takehome_wire``), down a pipe to a server in another sandbox, under
another uid, in another pid namespace, which imports the candidate's module
and runs each call in a fresh child process. Only data comes back: a return
value, or the name and message of an exception, which is raised here as the
same built-in type (``ValueError``...) or as a class named like the
candidate's own (a subclass of :class:`CandidateError`).

A stand-in also says where its module is imported from (``src`` for
``src/payterms/terms.py`` imported as ``payterms.terms``, as pytest's
``pythonpath`` setting arranges), and the server imports the candidate's
module from that folder of their tree: src layouts and packages work as
they do in a plain pytest run.

Paths the test passes are shipped with the call: files under ``/tmp`` (what
the test wrote, e.g. in ``tmp_path``) and data files under ``/tree`` (the
packet's own copies), never ``.py`` files; they are written at the same
absolute path beside the candidate's code before the call runs.
"""

import builtins
import os
import pathlib
import select
import threading
import time

import takehome_wire as wire

# why these clocks live here: this process never runs candidate code, so nothing the candidate's
# side does (a changed timer, blocked signals, a sleep) can stretch them (docs/evidence.md).
TIMEOUT_S = float(os.environ.get("TAKEHOME_PROXY_TIMEOUT_S", "3"))  # every use once a call has gone across
IMPORT_TIMEOUT_S = float(os.environ.get("TAKEHOME_PROXY_IMPORT_TIMEOUT_S", "25"))  # before: the import
MAX_REPLY_BYTES = 16 << 20
SHIP_MAX_BYTES = 8 << 20
SHIP_ROOTS = ("/tmp/", "/tree/")
NOT_BUILTIN = {"SystemExit", "KeyboardInterrupt", "GeneratorExit", "BaseException"}
# Names pytest and other tools probe on any object they meet (fixture markers,
# dunders): answered here, so that introspection never reaches the other side.
LOCAL_NAMES = ("__", "_pytest", "_fixture")


class CandidateError(Exception):
    """The candidate's code raised an exception that is not one of Python's built-in types."""


class BoundaryError(Exception):
    """A call could not cross the boundary: a value that is not plain data, no answer, a timeout."""


class CallTimedOut(BoundaryError):
    """No answer within the call's time limit. why not TimeoutError: that is an OSError, which a
    hidden test's ``pytest.raises(OSError)`` would take for the answer it expects."""


class _Channel:
    """One request, one reply, in order, over two inherited pipe file descriptors."""

    def __init__(self, spec):
        read_fd, write_fd = (int(x) for x in spec.split(","))
        self.read_fd, self.write_fd = read_fd, write_fd
        self.buffer = b""
        self.lock = threading.Lock()
        self.called = False  # a call has carried inputs across: every use is on the tight clock from now on
        self.broken = None  # why the channel is given up, once an answer did not come

    def ask(self, message):
        with self.lock:
            if self.broken:
                raise BoundaryError(self.broken)
            self.called = self.called or message.get("op") == "call"
            limit = TIMEOUT_S if self.called else max(TIMEOUT_S, IMPORT_TIMEOUT_S)
            data = wire.dumps(message)
            while data:
                data = data[os.write(self.write_fd, data) :]
            try:
                return self._reply(limit)
            except BoundaryError as exc:
                # why never ask again: a late answer would be read as the next call's.
                self.broken = "the candidate's side stopped answering (%s)" % exc
                raise

    def _reply(self, limit):
        deadline = time.monotonic() + limit
        while b"\n" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.read_fd], [], [], left)[0]:
                raise CallTimedOut("the candidate's code gave no answer within %g s" % limit)
            chunk = os.read(self.read_fd, 1 << 16)
            if not chunk:
                raise BoundaryError("the candidate's side of the sandbox ended without an answer")
            self.buffer += chunk
            if len(self.buffer) > MAX_REPLY_BYTES:
                raise BoundaryError("the answer is larger than %d MiB" % (MAX_REPLY_BYTES >> 20))
        line, _, self.buffer = self.buffer.partition(b"\n")
        return wire.loads(line)


_channel = None


# Module name -> the folder it is imported from, relative to the tree's root ("" = the root).
_roots = {}


def _ask(message):
    global _channel
    if _channel is None:
        spec = os.environ.get("TAKEHOME_PROXY_FDS")
        if not spec:
            raise BoundaryError("no channel to the candidate's code (TAKEHOME_PROXY_FDS is not set)")
        _channel = _Channel(spec)
    reply = _channel.ask(dict(message, root=_roots.get(message.get("module"), "")))
    if "error" in reply:
        raise _exception(reply["error"])
    return reply


# --- exceptions ------------------------------------------------------------------------

_classes = {}


def _builtin_exception(name):
    found = getattr(builtins, name, None) if isinstance(name, str) and name not in NOT_BUILTIN else None
    return found if isinstance(found, type) and issubclass(found, BaseException) else None


def _exception_class(module, qualname, bases):
    """The stand-in for the candidate's exception class ``module.qualname``; one object per name."""
    key = (module, qualname)
    if key not in _classes:
        base = next((b for b in map(_builtin_exception, bases or ()) if b and issubclass(b, Exception)), None)
        parents = (CandidateError,) if base in (None, Exception) else (CandidateError, base)
        _classes[key] = type(
            str(qualname).rsplit(".", 1)[-1], parents, {"__module__": str(module), "__qualname__": str(qualname)}
        )
    return _classes[key]


def _exception(error):
    """The exception to raise here for an error the other side described (never one of its objects)."""
    if not isinstance(error, dict):
        return BoundaryError("the candidate's side sent an unreadable error")
    kind, module = error.get("type"), error.get("module")
    message = str(error.get("message", ""))
    detail = str(error.get("traceback", ""))[-4000:]
    if error.get("boundary"):
        return BoundaryError(message)
    builtin = _builtin_exception(kind) if module == "builtins" else None
    if builtin is not None:
        exc = builtin(message)
    elif isinstance(kind, str) and isinstance(module, str):
        exc = _exception_class(module, kind, error.get("bases"))(message)
    else:
        exc = CandidateError(message)
    if detail:
        exc.candidate_traceback = detail
        if hasattr(exc, "add_note"):  # Python 3.11+: shown under the test's failure
            exc.add_note("Raised in the candidate's code:\n" + detail)
    return exc


# --- files the test passes --------------------------------------------------------------


def _ship(value, found, depth=0):
    """Collect the files behind paths in ``value`` (see the module docstring)."""
    if depth > wire.MAX_DEPTH:
        return
    if isinstance(value, (list, tuple, set, frozenset)):
        for v in value:
            _ship(v, found, depth + 1)
    elif isinstance(value, dict):
        for k, v in value.items():
            _ship(k, found, depth + 1)
            _ship(v, found, depth + 1)
    elif isinstance(value, pathlib.PurePath) or (isinstance(value, str) and value.startswith(SHIP_ROOTS)):
        path = os.path.abspath(str(value))
        if not path.startswith(SHIP_ROOTS):
            return
        if os.path.isdir(path):
            for folder, dirs, files in os.walk(path):
                dirs[:] = [d for d in dirs if d != "__pycache__"]
                for name in files:
                    _add_file(os.path.join(folder, name), found)
        else:
            _add_file(path, found)


def _add_file(path, found):
    # why never .py: the stand-ins for the candidate's modules live in this tree;
    # shipping one would replace the candidate's code with the stand-in.
    if path.endswith((".py", ".pyc")) or path in found or not os.path.isfile(path) or os.path.islink(path):
        return
    with open(path, "rb") as fh:
        data = fh.read(SHIP_MAX_BYTES + 1)
    if sum(len(d) for d in found.values()) + len(data) > SHIP_MAX_BYTES:
        raise BoundaryError("the files passed to one call exceed %d MiB" % (SHIP_MAX_BYTES >> 20))
    found[path] = data


# --- the stand-ins ------------------------------------------------------------------------


def _describe(module, path, reply):
    kind = reply.get("kind")
    if kind == "value":
        return wire.decode(reply.get("value"))
    if kind == "exception":
        return _exception_class(module, ".".join(path), reply.get("bases"))
    if kind in ("callable", "module", "object"):
        return Remote(module, path, kind)
    raise BoundaryError("an unknown kind of attribute: %r" % (kind,))


class Remote:
    """Something of the candidate's that is reached, not held: a function, a class, a submodule."""

    def __init__(self, module, path, kind):
        self._module, self._path, self._kind = module, tuple(path), kind

    def __call__(self, *args, **kwargs):
        files = {}
        _ship(args, files)
        _ship(kwargs, files)
        try:
            message = {
                "op": "call",
                "module": self._module,
                "path": list(self._path),
                "args": wire.encode(list(args)),
                "kwargs": wire.encode(kwargs),
                "files": wire.encode(files),
            }
        except wire.WireError as exc:
            raise BoundaryError("cannot pass this to the candidate's %s: %s" % (self, exc)) from None
        reply = _ask(message)
        try:
            return wire.decode(reply.get("value"))
        except wire.WireError as exc:
            raise BoundaryError("the candidate's %s returned something unreadable: %s" % (self, exc)) from None

    def __getattr__(self, name):
        if name.startswith(LOCAL_NAMES):
            raise AttributeError(name)
        return _attribute(self._module, (*self._path, name))

    def __repr__(self):
        return "<candidate's %s %s>" % (self._kind, ".".join((self._module, *self._path)))


def _attribute(module, path):
    reply = _ask({"op": "attr", "module": module, "path": list(path)})
    if reply.get("missing"):
        raise AttributeError("the candidate's module %r has no attribute %r" % (module, ".".join(path)))
    return _describe(module, path, reply)


def import_root(module, file, cwd):
    """The folder, relative to ``cwd`` (the tree's root), that ``module`` at ``file`` is imported from.

    ``payterms.terms`` at ``/tree/src/payterms/terms.py`` gives ``src``; a
    package's ``__init__.py`` counts as the package. A file outside the tree,
    or one whose path does not end in the module's name, gives the root.
    """
    parts = module.split(".")
    if os.path.basename(file) == "__init__.py":
        parts.append("__init__")
    folder, name = os.path.split(os.path.splitext(os.path.abspath(file))[0])
    for part in reversed(parts):
        if name != part:
            return ""
        folder, name = os.path.split(folder)
    root = os.path.relpath(os.path.join(folder, name), cwd)
    if root == os.curdir or root == os.pardir or root.startswith(os.pardir + os.sep):
        return ""
    return root


def module_hooks(module, file=None):
    """``__getattr__`` and ``__dir__`` for a stand-in module named ``module`` at ``file`` (PEP 562)."""
    if file:
        _roots[module] = import_root(module, file, os.getcwd())

    def __getattr__(name):
        if name == "__all__":
            return [n for n in __dir__() if not n.startswith("_")]
        if name.startswith(LOCAL_NAMES):
            raise AttributeError(name)
        return _attribute(module, (name,))

    def __dir__():
        names = _ask({"op": "dir", "module": module}).get("names", [])
        return [n for n in names if isinstance(n, str)] if isinstance(names, list) else []

    return __getattr__, __dir__
