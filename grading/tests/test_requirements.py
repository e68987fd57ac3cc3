"""A packet's requirements.txt: what is accepted, and the sentence for each refusal."""

import pytest

from grading.engine.requirements import (
    MAX_REQUIREMENTS_BYTES,
    RequirementsRefused,
    check_requirements,
    normalised,
    requirement_names,
)

HASH = "sha256:" + "ab" * 32


@pytest.mark.parametrize("text", [
    "",
    "# only a comment\n\n",
    "attrs==23.2.0\n",
    "requests[socks]==2.32.3  # a comment after the pin\n",
    'python-dateutil==2.9.0.post0 ; python_version >= "3.8"\n',
    f"attrs==23.2.0 --hash={HASH}\n",
    f"attrs==23.2.0 \\\n    --hash={HASH} \\\n    --hash=sha256:{'cd' * 32}\nsix==1.16.0 --hash {HASH}\n",
    "Attrs==23.2.0\r\nsix==1.16.0\r\n",
])
def test_accepted(text):
    assert check_requirements(text) == []


@pytest.mark.parametrize("text, expected", [
    ("attrs==1\npkg @ https://example.org/pkg-1.0.whl\n", "Line 2: pkg @ https://example.org/pkg-1.0.whl is a URL"),
    ("https://example.org/pkg-1.0.tar.gz\n", "Line 1: https://example.org/pkg-1.0.tar.gz is a URL"),
    ("git+https://github.com/a/b.git\n", "is a URL"),
    ("file:///srv/pkg\n", "is a URL"),
    ("./vendor/pkg\n", "Line 1: ./vendor/pkg is a local path"),
    ("/srv/pkg-1.0-py3-none-any.whl\n", "is a local path"),
    ("pkg-1.0.tar.gz\n", "is a local path"),
    ("-e .\n", "Line 1: -e installs from a local folder"),
    ("--editable=git+https://x/y\n", "--editable installs from a local folder"),
    ("-r base.txt\n", "Line 1: -r includes another file"),
    ("-c constraints.txt\n", "-c includes another file"),
    ("--index-url https://evil.example/simple\n", "Line 1: --index-url changes where packages come from"),
    ("-i https://evil.example/simple\n", "-i changes where packages come from"),
    ("--extra-index-url=https://evil.example/simple\n", "--extra-index-url changes where packages come from"),
    ("-f /tmp/wheels\n", "-f changes where packages come from"),
    ("--find-links /tmp\n", "--find-links changes where"),
    ("--trusted-host evil.example\n", "--trusted-host changes where"),
    ("--no-index\n", "--no-index changes where"),
    ("--pre\n", "Line 1: the option --pre is not allowed"),
    ("attrs==23.2.0 --no-binary :all:\n", "Line 1: the option --no-binary is not allowed"),
    ("\n\nattrs\n", "Line 3: attrs has no version; pin one exactly"),
    ("attrs>=23\n", "Line 1: attrs>=23 is not pinned to one version"),
    ("attrs~=23.1\n", "attrs~=23.1 is not pinned to one version"),
    ("attrs==23.*\n", "attrs==23.* is not pinned to one version"),
    ("attrs>=22,<24\n", "is not pinned to one version"),
    ("attrs==23.2.0\nsix==1.16.0\nAttrs==23.1.0\n", "Line 3: attrs is already on line 1; give each package once"),
    ("python_dateutil==2.9.0\npython-dateutil==2.9.0\n", "Line 2: python-dateutil is already on line 1"),
    (f"attrs==23.2.0 --hash={HASH}\nsix==1.16.0\n", "Line 2: six has no --hash, but other lines have one"),
    ("attrs==23.2.0 --hash=md5:0123\n", "Line 1: --hash=md5:0123 is not a hash pip can check"),
    ("attrs==23.2.0 --hash=sha256:xyz\n", "is not a hash pip can check"),
    ("attrs===23\n", "is not pinned to one version"),
    ("attrs==23.2.0 \\\n  --hash=sha256:short\nsix\n", "Line 3: six has no version"),
    ("!!!\n", "Line 1: !!! is not a requirement pip can read"),
])
def test_refused_with_the_line_and_the_package(text, expected):
    problems = check_requirements(text)
    assert any(expected in problem for problem in problems), problems


def test_every_problem_is_listed_in_line_order():
    problems = check_requirements("attrs\n-e .\nsix>=1\n")
    assert [problem.split(":")[0] for problem in problems] == ["Line 1", "Line 2", "Line 3"]


def test_an_oversized_file_says_its_size_and_the_limit():
    text = "attrs==23.2.0  # padding padding padding\n" * 2000
    assert len(text) > MAX_REQUIREMENTS_BYTES
    (problem,) = check_requirements(text)
    assert f"is {len(text):,} bytes; the limit is {MAX_REQUIREMENTS_BYTES:,} bytes" in problem


def test_a_megabyte_is_refused_at_once():
    assert check_requirements("x" * (1 << 20))[0].startswith("requirements.txt is 1,048,576 bytes")


@pytest.mark.parametrize("data", [b"attrs==23.2.0\n\xff\xfe\n", "attrs==1\n\udcff\n"])
def test_text_that_is_not_utf8_is_refused(data):
    (problem,) = check_requirements(data)
    assert problem.startswith("requirements.txt is not UTF-8 text") and problem.endswith("save it as UTF-8.")


def test_utf8_bytes_are_read():
    assert check_requirements("# café\nattrs==23.2.0\n".encode()) == []


def test_names_are_canonical():
    assert requirement_names("Python_Dateutil==2.9.0\nzope.interface==6.0\n") == {"python-dateutil", "zope-interface"}


def test_pip_gets_the_checked_pins_sorted_without_comments():
    text = f"# ours\nSix==1.16.0 --hash={HASH.upper().replace('SHA256', 'sha256')}\nAttrs[Tests]==23.2.0 --hash={HASH}\n"
    assert normalised(text) == (f"attrs[tests]==23.2.0 --hash={HASH}\nsix==1.16.0 --hash={HASH}\n")


def test_normalised_refuses_bad_text_with_every_sentence():
    with pytest.raises(RequirementsRefused) as refused:
        normalised("attrs\nsix>=1\n")
    assert "Line 1: attrs has no version" in str(refused.value) and "Line 2: six>=1 is not pinned to one version" in str(refused.value)


def test_the_refusal_lists_ten_problems_at_most():
    with pytest.raises(RequirementsRefused) as refused:
        normalised("attrs\n" * 25)
    assert str(refused.value).count("Line ") == 10 and str(refused.value).endswith("And 15 more problems.")
