"""Diff check: per-file diffs and flags for honest and unsafe submissions."""

import pytest

from grading.engine.checks.diff import MAX_DIFF_CHARS, diff_trees
from grading.engine.spec import sample_spec

SPEC = sample_spec()
FIXED = SPEC.solution["invoices.py"]
TEST_1300 = SPEC.fixture["test_invoices.py"].replace(
    b"def test_charges_only():\n    assert invoices.total(FIXTURE) == 1500",
    b"def test_refund_rows_are_negative_cents():\n    # 1000 + 500 + (-200)\n"
    b"    assert invoices.total(FIXTURE) == 1300")
EVAL_FIX = FIXED.replace(b'int(row["cents"])', b'eval(row["cents"])')


def make_tree(tmp_path, changes: dict, *, original=None):
    """The original fixture with ``changes`` applied (bytes to write, None to delete)."""
    root = tmp_path / "tree"
    files = dict(original or SPEC.fixture)
    files.update(changes)
    for path, data in files.items():
        if data is None:
            continue
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_bytes(data)
    return root


def crlf(data: bytes) -> bytes:
    return data.replace(b"\n", b"\r\n")


CASES = [
    # (case, changes, expected flags)
    ("ideal fix", {"invoices.py": FIXED, "test_invoices.py": TEST_1300,
                   "artifacts/red.log": b"1 failed in 0.02s\n", "artifacts/model.md": b"use eval(row)"}, []),
    ("out of time: only the test", {"test_invoices.py": TEST_1300}, []),
    ("Windows checkout: every file CRLF", {p: crlf(d) for p, d in SPEC.fixture.items()}, []),
    ("Windows: CRLF and the fix", {"invoices.py": crlf(FIXED), "sample.csv": crlf(SPEC.fixture["sample.csv"]),
                                   "test_invoices.py": crlf(TEST_1300)}, []),
    ("Notepad added a BOM to the CSV", {"sample.csv": b"\xef\xbb\xbf" + SPEC.fixture["sample.csv"]}, []),
    ("caches left in the zip", {".pytest_cache/v/cache/nodeids": b"[]", "__pycache__/invoices.cpython-311.pyc": b"\0",
                                "invoices.pyc": b"\0\1", ".DS_Store": b"\0"}, []),
    ("eval only mentioned in a comment", {"invoices.py": FIXED + b"# the model wanted eval(row) here; no\n"}, []),
    ("eval and /etc mentioned in notes outside artifacts", {"NOTES.md": b"I refused eval( and /etc/passwd\n"},
     ["added:NOTES.md"]),
    ("conftest with a fixture only", {"conftest.py": b"import pytest\n\n@pytest.fixture\ndef csv_path(): ...\n"},
     ["added:conftest.py"]),
    ("refund row dropped", {"sample.csv": b"cents\n1000\n500\n", "invoices.py": FIXED}, ["protected_changed:sample.csv"]),
    ("CSV removed", {"sample.csv": None}, ["protected_removed:sample.csv"]),
    ("CSV made binary", {"sample.csv": b"cents\0\n"}, ["protected_changed:sample.csv"]),
    ("eval fix", {"invoices.py": EVAL_FIX}, ["forbidden:eval"]),
    ("eval fix with CRLF", {"invoices.py": crlf(EVAL_FIX)}, ["forbidden:eval"]),
    ("reads /etc", {"invoices.py": FIXED + b'\nLIMIT = open("/etc/billing.conf").read()\n'}, ["forbidden:/etc"]),
    ("heavy dependency", {"invoices.py": b"import pandas as pd\n\ndef total(path):\n"
                                         b"    return int(pd.read_csv(path)['cents'].sum())\n",
                          "requirements.txt": b"pandas==2.2.2\n"},
     ["added:requirements.txt", "forbidden:pandas"]),
    ("helper running a shell", {"helper.py": b"import subprocess, os\nos.system('ls')\n"},
     ["added:helper.py", "forbidden:os.system", "forbidden:subprocess"]),
    ("test removed", {"test_invoices.py": None, "tests/test_new.py": TEST_1300},
     ["added:tests/test_new.py", "removed:test_invoices.py"]),
    ("conftest rewrites reports",
     {"conftest.py": b"import pytest\n\n@pytest.hookimpl(hookwrapper=True)\n"
                     b"def pytest_runtest_makereport(item, call):\n    outcome = yield\n"
                     b"    outcome.get_result().outcome = 'passed'\n"},
     ["added:conftest.py", "conftest_hooks:conftest.py"]),
    ("hook hidden in a test module", {"test_invoices.py": TEST_1300 + b"\n\ndef pytest_report_teststatus(report):\n"
                                                                      b"    return 'passed', '.', 'PASSED'\n"},
     ["conftest_hooks:test_invoices.py"]),
]


@pytest.mark.parametrize("case,changes,flags", CASES, ids=[c[0] for c in CASES])
def test_flags(tmp_path, case, changes, flags):
    report = diff_trees(SPEC.fixture, make_tree(tmp_path, changes), protected_paths=SPEC.protected_paths,
                        forbidden_patterns=SPEC.forbidden_patterns)
    assert list(report.flags) == flags
    assert not any(f.path.startswith("artifacts/") for f in report.files)


def test_forbidden_only_counts_added_lines(tmp_path):
    original = dict(SPEC.fixture, **{"legacy.py": b"def parse(s):\n    return eval(s)\n"})
    tree = make_tree(tmp_path, {"legacy.py": b"def parse(s):\n        return eval(s)  # moved\n",
                                "invoices.py": FIXED}, original=original)
    report = diff_trees(original, tree, protected_paths=("sample.csv",), forbidden_patterns=SPEC.forbidden_patterns)
    assert report.flags == ()
    assert [f.path for f in report.files] == ["invoices.py", "legacy.py"]


def test_files_and_dict_shape(tmp_path):
    tree = make_tree(tmp_path, {"invoices.py": FIXED, "test_invoices.py": TEST_1300, "zz_test.py": b"x = 1\n",
                                "logo.png": b"\x89PNG\0\0", "sample.csv": crlf(SPEC.fixture["sample.csv"])})
    data = diff_trees(SPEC.fixture, tree, protected_paths=("sample.csv",), forbidden_patterns={}).to_dict()
    assert [(f["path"], f["status"], f["is_test"]) for f in data["files"]] == [
        ("test_invoices.py", "modified", True), ("zz_test.py", "added", True),
        ("invoices.py", "modified", False), ("logo.png", "added", False), ("sample.csv", "modified", False)]
    by_path = {f["path"]: f for f in data["files"]}
    assert by_path["invoices.py"]["diff"].startswith("--- a/invoices.py\n+++ b/invoices.py\n")
    assert '-            n += abs(int(row["cents"]))\n+            n += int(row["cents"])\n' in by_path["invoices.py"]["diff"]
    assert by_path["zz_test.py"]["diff"].startswith("--- /dev/null\n+++ b/zz_test.py\n")
    assert by_path["logo.png"] == {"path": "logo.png", "status": "added", "diff": "binary file added",
                                   "is_test": False, "binary": True}
    assert by_path["sample.csv"]["diff"].startswith("only line endings")
    assert data["flags"] == ["added:logo.png", "added:zz_test.py"]


def test_huge_diff_is_truncated(tmp_path):
    big = b"".join(b"X%d = %d\n" % (i, i) for i in range(10_000, 24_000))
    report = diff_trees(SPEC.fixture, make_tree(tmp_path, {"big.py": big}), protected_paths=(),
                        forbidden_patterns=SPEC.forbidden_patterns)
    (big_file,) = [f for f in report.files if f.path == "big.py"]
    assert len(big_file.diff) < MAX_DIFF_CHARS + 200
    assert "diff truncated" in big_file.diff
