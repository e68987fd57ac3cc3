"""The candidate's side of the process boundary: answer the hidden tests' calls.

Started as ``python -I /opt/takehome/takehome_proxy_server.py`` in a sandbox
of its own over the candidate's tree (see ``takehome_proxy`` for the other
side). It imports the candidate's modules on first use, and runs every call
in a fresh child process (``fork``), so a call that crashes, hangs or
changes module state leaves nothing behind for the next one. Replies are
plain data (``takehome_wire``).

Nothing here is trusted: the candidate's code shares this interpreter and
could change anything in it. That is harmless by design, because all this
process can do is send data, which the hidden tests judge.
"""

import importlib
import os
import select
import signal
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import takehome_wire as wire  # noqa: E402  (before the tree goes on sys.path: no shadowing)

sys.path.insert(0, os.getcwd())

CALL_TIMEOUT_S = float(os.environ.get("TAKEHOME_PROXY_CALL_TIMEOUT_S", "2"))
IMPORT_TIMEOUT_S = float(os.environ.get("TAKEHOME_PROXY_IMPORT_TIMEOUT_S", "20"))
MAX_REPLY_BYTES = 16 << 20
_modules = {}


def _error(exc, boundary=False):
    kind = type(exc)
    bases = [c.__name__ for c in kind.__mro__ if c.__module__ == "builtins"]
    return {
        "error": {
            "type": kind.__qualname__,
            "module": kind.__module__,
            "bases": bases,
            "message": str(exc)[:20000],
            "boundary": boundary,
            "traceback": "".join(traceback.format_exception(kind, exc, exc.__traceback__))[-8000:],
        }
    }


def _add_import_root(root):
    """Put ``root`` (a folder of the tree, e.g. ``src``) on sys.path, as pytest's ``pythonpath`` does."""
    root = os.path.normpath(str(root or ""))
    if root == os.curdir or os.path.isabs(root) or root.split(os.sep)[0] == os.pardir:
        return
    folder = os.path.join(os.getcwd(), root)
    if folder not in sys.path:
        sys.path.insert(0, folder)


def _module(name, root=""):
    """Import the candidate's module once; an import that fails fails every use, the same way."""
    if name not in _modules:
        _add_import_root(root)

        def give_up(signum, frame):
            raise TimeoutError("importing %s took longer than %g s" % (name, IMPORT_TIMEOUT_S))

        signal.signal(signal.SIGALRM, give_up)
        signal.setitimer(signal.ITIMER_REAL, IMPORT_TIMEOUT_S)
        try:
            _modules[name] = (importlib.import_module(name), None)
        except BaseException as exc:  # noqa: BLE001 (the candidate's import may raise anything)
            _modules[name] = (None, exc)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
    module, exc = _modules[name]
    if exc is not None:
        raise exc
    return module


def _resolve(message):
    target = _module(str(message.get("module")), message.get("root"))
    for name in message.get("path") or ():
        target = getattr(target, str(name))
    return target


def _describe(value):
    if isinstance(value, type) and issubclass(value, BaseException):
        return {"kind": "exception", "bases": [c.__name__ for c in value.__mro__ if c.__module__ == "builtins"]}
    if type(value).__name__ == "module":
        return {"kind": "module"}
    if callable(value):
        return {"kind": "callable"}
    try:
        return {"kind": "value", "value": wire.encode(value)}
    except wire.WireError:
        return {"kind": "object"}


def _attr(message):
    try:
        return _describe(_resolve(message))
    except AttributeError as exc:
        return {"missing": True, "message": str(exc)}


def _dir(message):
    names = dir(_module(str(message.get("module")), message.get("root")))
    return {"names": [n for n in names if isinstance(n, str)]}


def _place_files(files):
    for path, data in files.items():
        folder = os.path.dirname(str(path))
        if folder:
            os.makedirs(folder, exist_ok=True)
        with open(str(path), "wb") as fh:
            fh.write(data)


def _call_in_child(message):
    """Run one call in a forked child; its reply, or an error saying how it ended."""
    for stream in (sys.stdout, sys.stderr):  # why: a child would print the parent's buffered output again
        try:
            stream.flush()
        except Exception:  # noqa: BLE001
            pass
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_fd)
        try:
            _place_files(wire.decode(message.get("files") or {"$dict": []}))
            target = _resolve(message)
            args = wire.decode(message.get("args") or [])
            kwargs = wire.decode(message.get("kwargs") or {"$dict": []})
            result = target(*args, **kwargs)
            try:
                reply = {"value": wire.encode(result)}
            except wire.WireError as exc:
                reply = _error(exc, boundary=True)
        except BaseException as exc:  # noqa: BLE001
            reply = _error(exc)
        data = wire.dumps(reply)
        while data:
            data = data[os.write(write_fd, data) :]
        for stream in (sys.stdout, sys.stderr):  # why: os._exit skips the flush, and prints would be lost
            try:
                stream.flush()
            except Exception:  # noqa: BLE001 (the candidate may have replaced the stream)
                pass
        os._exit(0)
    os.close(write_fd)
    received = b""
    deadline = time.monotonic() + CALL_TIMEOUT_S
    timed_out = False
    while True:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([read_fd], [], [], left)[0]:
            timed_out = True
            break
        chunk = os.read(read_fd, 1 << 16)
        received += chunk
        # why stop at the newline, not at EOF: a process the call started may
        # keep the pipe open long after the reply was written.
        if not chunk or b"\n" in chunk or len(received) > MAX_REPLY_BYTES:
            break
    os.close(read_fd)
    if timed_out:
        os.kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    if timed_out:
        # why a boundary error: a TimeoutError is an OSError, which a test may expect as an answer.
        return _error(TimeoutError("the call did not return within %g s" % CALL_TIMEOUT_S), boundary=True)
    if len(received) > MAX_REPLY_BYTES:
        return _error(wire.WireError("the reply is larger than %d MiB" % (MAX_REPLY_BYTES >> 20)), boundary=True)
    received = received.split(b"\n", 1)[0] + b"\n" if b"\n" in received else received
    if not received.endswith(b"\n"):
        how = (
            "killed by signal %d" % os.WTERMSIG(status)
            if os.WIFSIGNALED(status)
            else "exit %d" % os.WEXITSTATUS(status)
        )
        return _error(
            RuntimeError("the call ended without an answer (%s: a limit such as memory, or the process exited)" % how)
        )
    try:
        return wire.loads(received.rstrip(b"\n"))
    except wire.WireError as exc:
        return _error(exc, boundary=True)


HANDLERS = {"attr": _attr, "dir": _dir, "call": _call_in_child}


def main():
    read_fd, write_fd = (int(x) for x in os.environ["TAKEHOME_PROXY_FDS"].split(","))
    buffer = b""
    while True:
        chunk = os.read(read_fd, 1 << 16)
        if not chunk:
            return 0  # the hidden tests are done
        buffer += chunk
        while b"\n" in buffer:
            line, _, buffer = buffer.partition(b"\n")
            try:
                message = wire.loads(line)
                reply = HANDLERS[message.get("op")](message)
            except BaseException as exc:  # noqa: BLE001
                reply = _error(exc)
            data = wire.dumps(reply)
            while data:
                data = data[os.write(write_fd, data) :]


if __name__ == "__main__":
    sys.exit(main())
