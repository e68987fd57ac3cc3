"""Artifacts check: presence, and reading text written on any machine."""

import pytest

from grading.engine.checks.artifacts import ARTIFACT_NAMES, check_artifacts, read_artifact

LOG = "F  [100%]\n1 failed in 0.03s\n"


def write(tmp_path, name, data: bytes):
    path = tmp_path / "artifacts" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def test_all_present(tmp_path):
    for name in ARTIFACT_NAMES:
        write(tmp_path, name, b"something\n")
    assert check_artifacts(tmp_path) == {name: True for name in ARTIFACT_NAMES}


def test_none_present(tmp_path):
    assert check_artifacts(tmp_path) == {name: False for name in ARTIFACT_NAMES}


@pytest.mark.parametrize("case,setup,present", [
    ("text", lambda p: write(p, "red.log", LOG.encode()), True),
    ("empty", lambda p: write(p, "red.log", b""), False),
    ("blank lines and spaces", lambda p: write(p, "red.log", b" \r\n\n\t"), False),
    ("only a BOM", lambda p: write(p, "red.log", b"\xef\xbb\xbf\n"), False),
    ("a folder named red.log", lambda p: (p / "artifacts" / "red.log").mkdir(parents=True), False),
    ("a symlink", lambda p: (write(p, "x", LOG.encode()), (p / "artifacts" / "red.log").symlink_to(p / "artifacts" / "x")), False),
    ("at the top, not under artifacts/", lambda p: (p / "red.log").write_text(LOG), False),
])
def test_presence(tmp_path, case, setup, present):
    setup(tmp_path)
    assert check_artifacts(tmp_path)["red.log"] is present


@pytest.mark.parametrize("case,data", [
    ("UTF-8", LOG.encode()),
    ("CRLF", LOG.replace("\n", "\r\n").encode()),
    ("old Mac CR", LOG.replace("\n", "\r").encode()),
    ("UTF-8 BOM (Notepad)", b"\xef\xbb\xbf" + LOG.encode()),
    ("UTF-16LE BOM (PowerShell 5 redirect)", b"\xff\xfe" + LOG.replace("\n", "\r\n").encode("utf-16-le")),
    ("UTF-16BE BOM", b"\xfe\xff" + LOG.encode("utf-16-be")),
])
def test_read_artifact_decodes(tmp_path, case, data):
    write(tmp_path, "red.log", data)
    assert read_artifact(tmp_path, "red.log") == LOG


def test_read_artifact_replaces_bad_bytes(tmp_path):
    write(tmp_path, "notes.md", b"caf\xe9 model was slow\n")
    assert read_artifact(tmp_path, "notes.md") == "caf\ufffd model was slow\n"


def test_read_artifact_missing(tmp_path):
    assert read_artifact(tmp_path, "red.log") is None


@pytest.mark.parametrize("encode", [str.encode, lambda s: b"\xff\xfe" + s.encode("utf-16-le")])
def test_long_file_keeps_head_and_tail(tmp_path, encode):
    body = "============================= test session starts ==============================\n"
    body += "x" * 1000 + "\n" + "noise line\n" * 50_000 + "1 failed in 0.03s\n"
    write(tmp_path, "red.log", encode(body))
    text = read_artifact(tmp_path, "red.log", limit=64 * 1024)
    assert text.startswith("============================= test session starts")
    assert text.endswith("noise line\n1 failed in 0.03s\n")
    assert "bytes not shown ...]" in text
    assert len(text) < 64 * 1024 + 100  # the two halves and the marker


def test_without_a_model_step_the_model_artifacts_are_not_asked_for(tmp_path):
    for name in ("red.log", "green.log", "refuse.md"):
        write(tmp_path, name, b"something\n")
    write(tmp_path, "model.md", b"a reply\n")
    found = check_artifacts(tmp_path, model_step=False)
    assert (found["prompt.txt"], found["model_allowed.at"], found["model.md"]) == (None, None, True)
    assert found["red.log"] is found["green.log"] is True and found["notes.md"] is False
    assert check_artifacts(tmp_path)["prompt.txt"] is False  # the model step asked for it: missing
