"""The hidden tests' process boundary, through the real sandbox: what crosses and what does not."""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import math
import pathlib
import sys

import pytest

from conftest import require
from grading.engine.core import STAND_IN, write_tree
from grading.engine.sandbox import PROXY_SERVER, SANDBOXED_DIR, STARTED_MARKER, Sandbox, SandboxUnavailable

sys.path.insert(0, str(SANDBOXED_DIR))
import takehome_proxy as proxy  # noqa: E402
import takehome_wire as wire  # noqa: E402

CANDIDATE = b'''import os
import sys
from decimal import Decimal
from pathlib import Path

RATE = 7
NAMES = ("a", "b")


class InvalidRow(ValueError):
    pass


class Plain:
    pass


def total(path):
    return sum(int(line) for line in Path(path).read_text().split()[1:])


def echo(*args, **kwargs):
    return [list(args), kwargs]


def raise_builtin():
    raise KeyError("missing")


def raise_own():
    raise InvalidRow("row 3 is not a number")


def returns_object():
    return Plain()


def hang():
    while True:
        pass


def crash():
    os._exit(3)


def count_calls():
    global CALLS
    CALLS = globals().get("CALLS", 0) + 1
    return CALLS


def read_dir(path):
    return sorted(p.name for p in Path(path).iterdir())


def money():
    return Decimal("10.10"), float("nan")
'''

HIDDEN = b'''import datetime
import math
from decimal import Decimal
from pathlib import Path

import pytest

import calc
from calc import total


def test_a_call_and_a_file_written_by_the_test(tmp_path):
    csv = tmp_path / "x.csv"
    csv.write_text("cents\\n5\\n-2\\n")
    assert total(csv) == 3
    assert total(str(csv)) == 3


def test_values_cross_both_ways():
    value = [1, 2.5, "s", None, True, (1, 2), {"k": [1]}, {3: "int key"}, {1, 2}, b"\\x00b",
             Path("/x"), Decimal("1.5"), datetime.date(2026, 1, 2)]
    assert calc.echo(*value, key=(1,)) == [value, {"key": (1,)}]


def test_constants_and_dir():
    assert calc.RATE == 7 and calc.NAMES == ("a", "b")
    assert "total" in dir(calc)


def test_builtin_exceptions_keep_their_type():
    with pytest.raises(KeyError, match="missing"):
        calc.raise_builtin()


def test_the_candidates_own_exception_class():
    with pytest.raises(calc.InvalidRow, match="row 3"):
        calc.raise_own()
    with pytest.raises(ValueError):
        calc.raise_own()


def test_an_object_cannot_cross():
    with pytest.raises(Exception, match="cannot cross the sandbox boundary"):
        calc.returns_object()


def test_a_missing_name():
    with pytest.raises(AttributeError):
        calc.nothing_here


def test_a_hung_call_fails_alone():
    # why not TimeoutError: that is an OSError, which a test could take for the answer it expects
    with pytest.raises(Exception, match="did not return within"):
        calc.hang()
    assert calc.RATE == 7


def test_a_crashed_call_fails_alone():
    with pytest.raises(RuntimeError, match="without an answer"):
        calc.crash()
    assert total(Path(__file__).with_name("data.csv")) == 10


def test_each_call_starts_from_the_imported_module():
    assert calc.count_calls() == 1
    assert calc.count_calls() == 1


def test_a_folder_of_data(tmp_path):
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "a.csv").write_text("x")
    (tmp_path / "d" / "b.csv").write_text("y")
    assert calc.read_dir(tmp_path / "d") == ["a.csv", "b.csv"]


def test_decimals_and_nan():
    amount, nan = calc.money()
    assert amount == Decimal("10.10") and math.isnan(nan)
'''


def test_what_crosses_the_boundary(grading_sandbox, tmp_path):
    trusted, server = tmp_path / "trusted", tmp_path / "server"
    write_tree({"calc.py": STAND_IN, "test_hidden.py": HIDDEN, "data.csv": b"n\n4\n6\n"}, trusted)
    write_tree({"calc.py": CANDIDATE, "data.csv": b"n\n4\n6\n"}, server)
    result = grading_sandbox.run_across_boundary(trusted, ("python", "-m", "pytest", "-q"), server,
                                                 call_timeout_s=2)
    assert result.failed == 0 and result.errors == 0, result.log + "\n--- server ---\n" + result.server_log
    assert (result.outcome, result.passed) == ("passed", 12)


def test_a_module_that_fails_to_import_fails_each_use_with_its_error(grading_sandbox, tmp_path):
    trusted, server = tmp_path / "trusted", tmp_path / "server"
    write_tree({"calc.py": STAND_IN,
                "test_hidden.py": b"import calc\n\ndef test_a():\n    assert calc.total('x') == 1\n"}, trusted)
    write_tree({"calc.py": b"import does_not_exist\n"}, server)
    result = grading_sandbox.run_across_boundary(trusted, ("python", "-m", "pytest", "-q"), server)
    assert result.outcome == "failed"
    assert "ModuleNotFoundError" in result.log and "does_not_exist" in result.log


def test_output_of_the_candidates_code_is_kept_apart(grading_sandbox, tmp_path):
    trusted, server = tmp_path / "trusted", tmp_path / "server"
    write_tree({"calc.py": STAND_IN, "test_hidden.py": b"import calc\n\ndef test_a():\n    assert calc.f() == 1\n"},
               trusted)
    write_tree({"calc.py": b"print('hello from import')\n\ndef f():\n    print('in the call')\n    return 1\n"},
               server)
    result = grading_sandbox.run_across_boundary(trusted, ("python", "-m", "pytest", "-q"), server)
    assert result.outcome == "passed"
    assert "hello from import" in result.server_log and "in the call" in result.server_log
    assert "hello from import" not in result.log
    assert STARTED_MARKER not in result.log + result.server_log


# A project laid out as a package under src/ (pytest's pythonpath = ["src"]), whose __init__ imports the
# module the hidden tests reach: the stand-in at src/shop/calc.py must be served from the candidate's src/.
SRC_LAYOUT_PYPROJECT = b'[tool.pytest.ini_options]\npythonpath = ["src"]\ntestpaths = ["tests"]\n'
SRC_LAYOUT_INIT = b"from .calc import f\nfrom .rates import RATE\n"
SRC_LAYOUT_HIDDEN = (b"import shop\nfrom shop import calc\n\n\ndef test_through_the_package():\n"
                     b"    assert shop.f() == calc.f() == shop.RATE * 6\n")


@pytest.mark.parametrize("tests_package", [False, True], ids=["tests-folder", "tests-package"])
def test_a_src_layout_package_is_served_from_the_candidates_src(grading_sandbox, tmp_path, tests_package):
    trusted, server = tmp_path / "trusted", tmp_path / "server"
    packet = {"pyproject.toml": SRC_LAYOUT_PYPROJECT, "src/shop/__init__.py": SRC_LAYOUT_INIT,
              "src/shop/rates.py": b"RATE = 7\n", **({"tests/__init__.py": b""} if tests_package else {})}
    write_tree({**packet, "src/shop/calc.py": STAND_IN, "tests/test_hidden.py": SRC_LAYOUT_HIDDEN}, trusted)
    write_tree({**packet, "src/shop/calc.py": b"from .rates import RATE\n\n\ndef f():\n    return RATE * 6\n"},
               server)
    result = grading_sandbox.run_across_boundary(trusted, ("python", "-m", "pytest", "-q"), server)
    assert (result.outcome, result.passed) == ("passed", 1), result.log + "\n--- server ---\n" + result.server_log


@pytest.mark.parametrize(("module", "file", "root"), [
    ("invoices", "/tree/invoices.py", ""),
    ("payterms.terms", "/tree/src/payterms/terms.py", "src"),
    ("payterms", "/tree/src/payterms/__init__.py", "src"),
    ("a.b.c", "/tree/lib/python/a/b/c.py", "lib/python"),
    ("src.payterms.terms", "/tree/src/payterms/terms.py", ""),  # imported from the root, as a namespace
    ("terms", "/tree/src/payterms/terms.py", "src/payterms"),
    ("elsewhere", "/tree/src/other.py", ""),  # the name does not match the file: the root
    ("outside", "/opt/outside.py", ""),  # outside the tree: the root
])
def test_a_stand_in_says_which_folder_its_module_is_imported_from(module, file, root):
    assert proxy.import_root(module, file, "/tree") == root


@dataclasses.dataclass(frozen=True)
class BrokenSide(Sandbox):
    """A sandbox whose bwrap cannot set up one side of the boundary: a bind from a path that does not exist."""

    broken: str = "server"

    def _argv(self, uid, runner, sandboxed, command, *rest, **options):
        argv = super()._argv(uid, runner, sandboxed, command, *rest, **options)
        if (tuple(command) == PROXY_SERVER) == (self.broken == "server"):
            at = argv.index("--json-status-fd")
            argv[at:at] = ["--ro-bind", "/nonexistent/takehome-gone", "/opt/gone"]
        return argv


@pytest.mark.parametrize("broken", ["server", "trusted"])
def test_a_side_bwrap_cannot_set_up_is_our_failure_not_a_failed_run(grading_sandbox, tmp_path, broken):
    trusted, server = tmp_path / "trusted", tmp_path / "server"
    write_tree({"calc.py": STAND_IN, "test_hidden.py": b"import calc\n\ndef test_a():\n    assert calc.f() == 1\n"},
               trusted)
    write_tree({"calc.py": b"def f():\n    return 1\n"}, server)
    sandbox = BrokenSide(**{f.name: getattr(grading_sandbox, f.name) for f in dataclasses.fields(Sandbox)},
                         broken=broken)
    with pytest.raises(SandboxUnavailable, match="bwrap could not set up the sandbox .*takehome-gone"):
        sandbox.run_across_boundary(trusted, ("python", "-m", "pytest", "-q"), server)


@pytest.mark.parametrize("too_big", ["server", "trusted"])
def test_a_side_whose_tree_does_not_fit_is_exit_125_and_neither_side_runs(grading_sandbox, tmp_path, too_big):
    sandbox = dataclasses.replace(grading_sandbox, limits=dataclasses.replace(grading_sandbox.limits,
                                                                              tmpfs_bytes=4 << 20))
    require(sandbox.caps_in_force().tmpfs == "mount", "the worker may not mount a tmpfs here (run as root)")
    trusted, server = tmp_path / "trusted", tmp_path / "server"
    write_tree({"calc.py": STAND_IN, "test_hidden.py": b"import calc\n\ndef test_a():\n    assert calc.f() == 1\n"},
               trusted)
    write_tree({"calc.py": b"def f():\n    return 1\n"}, server)
    (tmp_path / too_big / "big.bin").write_bytes(b"x" * (6 << 20))
    result = sandbox.run_across_boundary(trusted, ("python", "-m", "pytest", "-q"), server)
    assert (result.outcome, result.exit_code, result.passed) == ("failed", 125, 0), result.log
    assert any("unpacking the tree" in n for n in result.notes), result.notes
    assert "big.bin: No space left on device" in (result.server_log if too_big == "server" else result.log)
    assert "not run" in (result.log if too_big == "server" else result.server_log)


# --- the wire, pure ------------------------------------------------------------------------------


@pytest.mark.parametrize("value", [
    None, True, 0, -7, 10**40, 1.5, "text é", [1, [2]], (1, "a"), {"a": 1, 2: (3,)}, {1, 2}, frozenset({3}),
    b"\x00\xff", pathlib.Path("/tmp/a.csv"), decimal.Decimal("0.10"), datetime.datetime(2026, 1, 1, 12, 0),
    datetime.date(2026, 1, 1), {"$path": "not a tag"}, [{"$dict": []}],
])
def test_plain_data_round_trips(value):
    assert wire.decode(wire.loads(wire.dumps({"v": wire.encode(value)})[:-1])["v"]) == value


def test_nan_and_infinity_round_trip():
    back = wire.decode(wire.encode([math.nan, math.inf, -math.inf]))
    assert math.isnan(back[0]) and back[1:] == [math.inf, -math.inf]


@pytest.mark.parametrize("value", [object(), lambda: 1, type, Exception("x"), {[1]: 2} if False else iter([])])
def test_objects_do_not_cross(value):
    with pytest.raises(wire.WireError, match="cannot cross"):
        wire.encode(value)


@pytest.mark.parametrize("data", [
    {"a": 1}, {"$eval": "x"}, {"$bytes": 5}, {"$dict": [[[1], 2]]}, {"$dict": [1]}, {"$float": "big"},
    {"$set": "abc"}, {"$path": 1, "$x": 2},
])
def test_anything_not_made_by_encode_is_refused(data):
    with pytest.raises(wire.WireError):
        wire.decode(data)


def test_deep_or_broken_messages_are_refused():
    with pytest.raises(wire.WireError):
        wire.loads(b"[" * 100000)
    with pytest.raises(wire.WireError):
        wire.loads(b"\xff")
    with pytest.raises(wire.WireError):
        wire.decode(wire.encode([[[]]]) and eval("[" * 70 + "]" * 70))  # noqa: S307
