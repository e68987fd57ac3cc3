"""What a sandboxed run writes is read as hostile: the JUnit report, the witness's lines, the gate log.

Candidate code can write each of these. Through the real sandbox, a file
built to exhaust the grader (millions of elements, JSON nested past the
recursion limit) leaves a run that cannot be confirmed, never a crash of the
grading and never a pass.
"""

from __future__ import annotations

import pytest

from grading.engine.core import GradeOptions, grade_archive, write_tree
from grading.engine.integrity import judge_run, plant_canaries
from grading.engine.sandbox import JUNIT_MAX_ELEMENTS, parse_junit
from grading.engine.spec import sample_spec

from . import corpus

PYTEST = ("python", "-m", "pytest", "-q")

# The report's path is a link to the pipe it leaves by: the conftest removes the
# link so pytest writes a plain file, then sends its own report down the pipe.
JUNIT_REPLACER = '''import os

_LINK = "/tmp/.takeh" + "ome/junit.xml"
_PIPE = os.readlink(_LINK) if os.path.islink(_LINK) else None
if _PIPE:
    os.remove(_LINK)


def pytest_unconfigure(config):
    if _PIPE:
        with open(_PIPE, "wb") as fh:
            fh.write(REPORT)
'''

MANY_ELEMENTS = (b'<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite>'
                 + b'<testcase classname="test_a" name="test_a" file="test_a.py"/>' * (JUNIT_MAX_ELEMENTS + 10)
                 + b"</testsuite></testsuites>")
UTF16_DTD = ('<?xml version="1.0" encoding="utf-16"?><!DOCTYPE t [<!ENTITY a "aaaaaaaaaa">]>'
             '<testsuites><testsuite><testcase classname="test_a" name="test_a" file="test_a.py"/>'
             '</testsuite></testsuites>').encode("utf-16")


def run_with_report(sandbox, tmp_path, report: bytes):
    files = {"test_a.py": b"def test_a():\n    assert 1 == 2\n",
             "conftest.py": f"REPORT = {report!r}\n\n{JUNIT_REPLACER}".encode()}
    write_tree(files, tmp_path / "tree")
    return sandbox.run(tmp_path / "tree", PYTEST)


def test_a_report_of_too_many_elements_is_not_read(grading_sandbox, tmp_path):
    result = run_with_report(grading_sandbox, tmp_path, MANY_ELEMENTS)
    assert result.tests == ()
    assert any(f"more than {JUNIT_MAX_ELEMENTS} elements" in n for n in result.notes), result.notes
    assert result.outcome == "failed"  # from pytest's exit code and its text summary


def test_a_report_with_a_dtd_in_any_encoding_is_not_read(grading_sandbox, tmp_path):
    result = run_with_report(grading_sandbox, tmp_path, UTF16_DTD)
    assert result.tests == ()
    assert result.outcome != "passed"


@pytest.mark.parametrize("data", [
    b'<!DOCTYPE t [<!ENTITY a "b">]><testsuites><testcase name="x">&a;</testcase></testsuites>',
    b'<?xml version="1.0"?>\n<!doctype t SYSTEM "file:///etc/passwd"><testsuites/>',
    b'<testsuites><testcase name="x"/><testcase name="y"/></testsuites>junk',
    UTF16_DTD,
    MANY_ELEMENTS,
], ids=["entity", "external-dtd", "junk-after", "utf16-dtd", "many-elements"])
def test_parse_junit_refuses_hostile_reports(data):
    with pytest.raises(ValueError):
        parse_junit(data)


def test_parse_junit_reads_an_honest_report():
    data = (b'<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite>'
            b'<testcase classname="test_a" name="test_ok" file="test_a.py"><system-out>x</system-out></testcase>'
            b'<testcase classname="test_a" name="test_bad" file="test_a.py"><failure message="m">t</failure>'
            b'</testcase></testsuite></testsuites>')
    assert [(t.nodeid, t.outcome) for t in parse_junit(data)] == [
        ("test_a.py::test_ok", "passed"), ("test_a.py::test_bad", "failed")]


# Writes a line of JSON nested far past the parser's recursion limit to the witness's pipe.
WITNESS_FLOOD = b'''import os


def pytest_configure(config):
    os.write(int(os.environ["TAKEHOME_WITNESS_FD"]), b"[" * 200000 + b"\\n")
'''


def test_a_witness_line_nested_past_the_recursion_limit_is_skipped(grading_sandbox, tmp_path):
    files, planted = plant_canaries({"test_a.py": b"def test_a():\n    pass\n", "conftest.py": WITNESS_FLOOD})
    write_tree(files, tmp_path / "tree")
    result, record = judge_run(grading_sandbox.run(tmp_path / "tree", PYTEST), planted, grading_sandbox.limits)
    assert record["tampered"] == [], record
    assert (result.outcome, result.passed) == ("passed", 1), result.notes


def test_a_gate_log_line_nested_past_the_recursion_limit_is_kept_as_text(grading_sandbox, tmp_path, original_runs):
    nested = b"[" * 100000
    files = corpus.honest_files(**{"artifacts/receipts.jsonl": b'{"step": "red", "witnessed": false}\n'
                                   + nested + b"\n"})
    evidence = grade_archive(corpus.zip_with_times(tmp_path / "s.zip", files), sample_spec(), grading_sandbox,
                             options=GradeOptions(cache_dir=original_runs))
    assert evidence["runs"]["submitted"]["outcome"] == "passed"
    assert "[[[[" in str(evidence)
