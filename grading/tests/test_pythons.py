"""The server's Python interpreters: which can serve a packet, and why the others cannot."""

from pathlib import Path

import pytest

from grading.engine.pythons import Interpreter, PythonUnavailable, choose, discover

SYSTEM = Path("/usr/bin/python3")


def test_debian_python_is_usable():
    assert discover([SYSTEM]) == [Interpreter(SYSTEM, "3.11", None)]


def test_a_missing_path_says_so(tmp_path):
    (found,) = discover([tmp_path / "python3.12"])
    assert found.problem == f"{tmp_path / 'python3.12'} does not exist."


def test_a_file_that_is_not_executable_says_so(tmp_path):
    (tmp_path / "python").write_text("")
    assert discover([tmp_path / "python"])[0].problem.endswith("is not an executable file.")


def test_a_program_that_is_not_python_says_so(tmp_path):
    script = tmp_path / "python"
    script.write_text("#!/bin/sh\necho hello\n")
    script.chmod(0o755)
    assert discover([script])[0].problem.endswith("did not run as a Python interpreter.")


def test_an_interpreter_behind_a_private_folder_is_refused(tmp_path):
    # As pyenv's under /root (mode 0700): root runs it, the sandbox's uids cannot.
    private = tmp_path / "private"
    private.mkdir()
    (private / "python3").symlink_to(SYSTEM)
    private.chmod(0o700)
    (found,) = discover([private / "python3"])
    assert found.version == "3.11"
    assert "cannot be run by the sandbox's unprivileged users" in found.problem
    assert f"{private} (mode 0700)" in found.problem


def test_an_interpreter_without_venv_says_how_to_get_it(tmp_path):
    fake = tmp_path / "python3.13"
    fake.write_text('#!/bin/sh\necho \'{"version": "3.13", "executable": "/x", "base_prefix": "/usr", "venv": false}\'\n')
    fake.chmod(0o755)
    assert discover([fake])[0].problem == f"{fake} has no venv module (on Debian: apt-get install python3.13-venv)."


BROKEN = Interpreter(Path("/root/.pyenv/versions/3.12.1/bin/python3.12"), "3.12", "it cannot be reached.")
GOOD = Interpreter(SYSTEM, "3.11")
OTHER = Interpreter(Path("/usr/local/bin/python3.10"), "3.10")


def test_the_default_is_the_first_usable_one():
    assert choose([BROKEN, GOOD, OTHER], "") == GOOD


def test_a_version_is_chosen_by_its_number():
    assert choose([GOOD, OTHER], "3.10") == OTHER


def test_a_version_the_server_lacks_names_what_it_has():
    with pytest.raises(PythonUnavailable) as missing:
        choose([GOOD, OTHER, BROKEN], "3.13")
    assert str(missing.value) == "Python 3.13 is not on this server; it has 3.11, 3.10 (TAKEHOME_PYTHONS)."


def test_a_version_whose_interpreter_is_broken_says_why():
    with pytest.raises(PythonUnavailable, match=r"Python 3.12 cannot be used on this server: it cannot be reached"):
        choose([GOOD, BROKEN], "3.12")


def test_no_usable_interpreter_at_all():
    with pytest.raises(PythonUnavailable) as none:
        choose([BROKEN], "")
    assert str(none.value) == "No Python on this server can be used (TAKEHOME_PYTHONS): it cannot be reached."


@pytest.mark.parametrize("version", ["python3.11", "3", "3.11.2", "latest"])
def test_a_version_not_written_major_minor_is_refused(version):
    with pytest.raises(PythonUnavailable, match="is not a Python version; write it as major.minor"):
        choose([GOOD], version)


def test_discover_keeps_the_order_given(tmp_path):
    assert [found.path for found in discover([tmp_path / "a", SYSTEM])] == [tmp_path / "a", SYSTEM]
