"""A packet version's environment (requirements.txt and Python): the form, the download, the candidate's
page, the packet's page, and `manage.py check` (step 8)."""

import io
import os
import shutil
import tempfile
import zipfile
from pathlib import Path

import pytest
from django.core.management import call_command
from django.urls import reverse

from grading.engine.sandbox import interpreter_binds
from grading.system_checks import pythons_available
from sessions_app.tests.conftest import url
from shared import environments
from takehome.actions import VersionContent, do_check_version_now, do_create_version, sample_content
from takehome.models import Invitation, Packet, PacketCheck, PacketVersion
from takehome.tests.factories import InvitationFactory

from .test_packet_create import form_data

pytestmark = pytest.mark.django_db


def post_new(client, **overrides):
    return client.post(reverse("takehome:packet-create"), form_data(**overrides))


@pytest.mark.parametrize("requirements, words", [
    ("requests @ https://example.com/requests.whl\n", "Line 1: requests @ https://example.com/requests.whl is a URL"),
    ("six==1.17.0\n./local-package\n", "Line 2: ./local-package is a local path"),
    ("-e git+https://example.com/x.git#egg=x\n", "Line 1"),
    ("six>=1.0\n", "Line 1: six&gt;=1.0 is not pinned"),
    ("--index-url https://evil.example.com/simple\nsix==1.17.0\n", "Line 1: --index-url changes where packages come from"),
    ("six==1.17.0\n" + "# padding\n" * 120_000, "the limit is 65,536 bytes"),
])
def test_requirements_that_are_not_pinned_packages_from_the_index_are_refused_at_save(
        recruiter_client, requirements, words):
    response = post_new(recruiter_client, requirements=requirements)
    assert response.status_code == 200
    page = response.content.decode()
    assert "Nothing was saved." in page and words in page
    assert not Packet.objects.filter(slug="adding").exists()


def test_a_python_the_server_does_not_have_is_refused_at_save(recruiter_client):
    response = post_new(recruiter_client, python_version="2.7")
    assert response.status_code == 200 and "Nothing was saved." in response.content.decode()
    assert not Packet.objects.filter(slug="adding").exists()


def test_the_form_offers_the_servers_pythons_and_keeps_a_good_environment(recruiter_client):
    page = recruiter_client.get(reverse("takehome:packet-create")).content.decode()
    assert "The server&#x27;s default (3.11)" in page or "The server's default (3.11)" in page
    response = post_new(recruiter_client, requirements="six==1.17.0\r\n", python_version="3.11")
    assert response.status_code == 302, response.content.decode()[:3000]
    version = Packet.objects.get(slug="adding").latest_version()
    assert (version.requirements, version.python_version) == ("six==1.17.0\n", "3.11")
    detail = recruiter_client.get(version.packet.get_absolute_url()).content.decode()
    assert 'id="packet-requirements"' in detail and "six==1.17.0" in detail and "Python 3.11" in detail
    edit = recruiter_client.get(reverse("takehome:packet-edit", args=["adding"])).content.decode()
    assert "six==1.17.0\n</textarea>" in edit


def test_validate_content_refuses_a_bad_environment_from_any_door():
    _, _, content = sample_content()
    packet = Packet.objects.create(slug="door", title="Door")
    for requirements, python in (("requests\n", ""), ("", "3.99")):
        bad = VersionContent(**{**content.__dict__, "requirements": requirements, "python_version": python})
        with pytest.raises(Exception) as caught:
            do_create_version(packet, bad, send_check=False)
        assert "requests" in str(caught.value) or "3.99" in str(caught.value)
    assert not PacketVersion.objects.filter(packet=packet).exists()


def with_requirements(invitation: Invitation, requirements: str) -> Invitation:
    _, _, content = sample_content()
    version = do_create_version(invitation.packet_version.packet,
                                VersionContent(**{**content.__dict__, "requirements": requirements}),
                                send_check=False)
    return InvitationFactory(packet_version=version)


def unzip(data: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        return {info.filename: zf.read(info) for info in zf.infolist()}


def test_the_download_carries_the_requirements_and_says_how_to_install_them(client, invitation):
    needs = with_requirements(invitation, "six==1.17.0\n")
    client.post(url("start", needs), {"confirm": "yes"})
    files = unzip(client.get(url("download", needs)).content)
    assert files["refund-sum/requirements.txt"] == b"six==1.17.0\n"
    readme = files["refund-sum/README.txt"].decode()
    assert "  python -m venv .venv\n" in readme and "python -m pip install pytest -r requirements.txt" in readme
    assert "Python 3.11" in readme
    page = client.get(url("landing", needs)).content.decode()
    assert 'id="environment-step"' in page and "pip install pytest -r requirements.txt" in page


def test_a_packet_without_requirements_downloads_none_and_says_pytest_is_enough(client, invitation):
    started = invitation
    client.post(url("start", started), {"confirm": "yes"})
    files = unzip(client.get(url("download", started)).content)
    assert "refund-sum/requirements.txt" not in files
    assert "the project needs nothing else" in " ".join(files["refund-sum/README.txt"].decode().split())
    assert 'id="environment-step"' not in client.get(url("landing", started)).content.decode()


def test_check_lists_the_pythons_and_warns_of_one_that_cannot_be_used(settings, tmp_path, monkeypatch):
    assert pythons_available() == []  # other commands: nothing to say while every Python is usable
    monkeypatch.setattr("sys.argv", ["manage.py", "check"])
    settings.GRADING_PYTHONS = ["/usr/bin/python3", str(tmp_path / "python9.9")]
    messages = pythons_available()
    text = [m.msg for m in messages]
    assert any(m.id == "takehome.I107" and "3.11 (/usr/bin/python3)" in m.msg for m in messages), text
    assert any(m.id == "takehome.W106" and "python9.9" in m.msg for m in messages), text
    settings.GRADING_PYTHONS = [str(tmp_path / "python9.9")]
    assert any("None of TAKEHOME_PYTHONS" in m.msg for m in pythons_available())
    out = io.StringIO()
    settings.GRADING_PYTHONS = ["/usr/bin/python3"]
    call_command("check", stdout=out, stderr=out)
    assert "Pythons packets may choose: 3.11" in out.getvalue()


def test_the_shared_runner_serves_packets_with_no_requirements(settings):
    spec = sample_content()[2]
    assert environments.runner_key(_spec(spec, "", "")) is None
    assert environments.runner_key(_spec(spec, "", "3.11")) is None
    assert environments.runner_key(_spec(spec, "six==1.17.0\n", "")).startswith("py3.11-")


def _spec(content, requirements, python):
    from grading.engine.spec import PacketSpec

    return PacketSpec(slug="x", version=1, fixture=content.fixture, solution=content.solution,
                      reference_tests=content.reference_tests, requirements=requirements, python=python)


def test_a_runner_built_from_an_interpreter_outside_usr_sees_its_prefix_read_only(tmp_path):
    runner = tmp_path / "runner"
    runner.mkdir()
    assert interpreter_binds(runner) == []  # no pyvenv.cfg
    for home, binds in (("/usr/bin", []), ("/opt/python3.12/bin", ["--ro-bind", "/opt/python3.12", "/opt/python3.12"]),
                        ("/bin", []), ("/opt/bin", [])):
        (runner / "pyvenv.cfg").write_text(f"home = {home}\ninclude-system-site-packages = false\n")
        assert interpreter_binds(runner) == binds, home


@pytest.fixture
def runners_root(settings, local_index, seed_envs):
    """Packets' environments built from the local index into a folder the sandbox's uids can reach, holding
    the bare venv their builds start from (conftest.seed_envs)."""
    folder = Path(tempfile.mkdtemp(prefix="th-runners-", dir="/var/tmp"))
    os.chmod(folder, 0o755)
    seed_envs(folder)
    settings.GRADING_RUNNERS_DIR = folder
    settings.GRADING_PIP_INDEX_URL = local_index.url
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def version_needing(requirements: str) -> PacketVersion:
    slug, title, content = sample_content()
    packet = Packet.objects.create(slug=f"env-{abs(hash(requirements)) % 10_000}", title=title)
    return do_create_version(packet, VersionContent(**{**content.__dict__, "requirements": requirements}),
                             send_check=False)


@pytest.mark.parametrize("requirements, named", [
    ("tinylib==9.9\n", "tinylib"),
    ("no-such-project-anywhere==1.0\n", "no-such-project-anywhere"),
    ("srconly==1.0\n", "srconly"),
])
def test_a_package_that_cannot_be_installed_fails_the_self_check_by_name_and_stays_a_draft(
        runners_root, requirements, named):
    version = version_needing(requirements)
    check = do_check_version_now(version)
    assert check.status == PacketCheck.Status.FAILED, check.error
    first = check.results[0]
    assert first["check_id"] == "environment" and not first["passed"]
    assert named in first["summary"] and "could not be built" in first["summary"]
    assert all(not r["passed"] and "Not run" in r["summary"] for r in check.results[1:])
    assert version.state == PacketVersion.DRAFT and version.refusal_to_invite()
    assert not [p for p in runners_root.iterdir() if p.name.startswith("py") and not p.name.endswith(".lock")]


def test_an_installable_environment_is_built_once_and_the_checks_run_in_it(runners_root, client, invitation):
    version = version_needing("tinylib==1.0\n")
    check = do_check_version_now(version)
    assert check.status == PacketCheck.Status.PASSED, check.results
    first = check.results[0]
    assert first["check_id"] == "environment" and first["passed"] and "1 pinned package" in first["summary"]
    (built,) = [p for p in runners_root.iterdir() if p.is_dir() and p.name.startswith("py3.11-")]
    assert str(built) in first["log"] and "tinylib 1.0" in first["log"] and "pytest 9.2.0" in first["log"]
    assert environments.ready_runner(version.to_spec()) == built
    # The sandbox runs the packet's own environment: tinylib imports there, and not in the shared runner.
    from shared.sandboxes import sandbox_for_spec

    with tempfile.TemporaryDirectory() as tree:
        Path(tree, "test_env.py").write_text("import tinylib\n\ndef test_it():\n    assert tinylib.VERSION == '1.0'\n")
        os.chmod(tree, 0o755)
        assert sandbox_for_spec(version.to_spec()).run(Path(tree), ("python", "-m", "pytest", "-q")).outcome == "passed"
    again = do_check_version_now(version)
    assert again.status == PacketCheck.Status.PASSED
    assert [p for p in runners_root.iterdir() if p.is_dir() and p.name.startswith("py3.11-")] == [built]
    # build_runners finds it ready; prune_runners keeps it while the version is in use, removes it after.
    out = io.StringIO()
    call_command("build_runners", stdout=out)
    assert f"ready  {version}: {built}" in out.getvalue()
    call_command("prune_runners", stdout=out)
    assert built.is_dir()
    do_create_version(version.packet, sample_content()[2], send_check=False)  # a new latest, no live invitation
    call_command("prune_runners", stdout=out)
    assert not built.exists() and f"removed {built}" in out.getvalue()


def test_build_runners_leaves_drafts_to_their_next_self_check_and_prune_takes_a_failed_builds_lock(runners_root):
    version = version_needing("tinylib==9.9\n")
    do_check_version_now(version)
    assert version.state == PacketVersion.DRAFT
    out, err = io.StringIO(), io.StringIO()
    call_command("build_runners", stdout=out, stderr=err)
    assert str(version) not in out.getvalue() + err.getvalue()
    failed_lock = runners_root / f"{environments.runner_key(version.to_spec())}.lock"
    assert failed_lock.exists()
    call_command("prune_runners", stdout=io.StringIO())
    assert failed_lock.exists()  # the packet's latest version: in use, its next check may build it
    do_create_version(version.packet, sample_content()[2], send_check=False)
    call_command("prune_runners", stdout=io.StringIO())
    assert not failed_lock.exists()  # a failed build leaves nothing behind once pruned
