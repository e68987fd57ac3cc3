"""A packet version's environment (requirements.txt and Python): the form, the download, the candidate's
page, the packet's page, and `manage.py check` (step 8)."""

import io
import zipfile

import pytest
from django.core.management import call_command
from django.urls import reverse

from grading import environments
from grading.sandbox import interpreter_binds
from grading.system_checks import pythons_available
from sessions_app.tests.conftest import url
from takehome.actions import VersionContent, do_create_version, sample_content
from takehome.models import Invitation, Packet, PacketVersion
from takehome.tests.factories import InvitationFactory

from .test_packet_create import form_data

pytestmark = pytest.mark.django_db


def post_new(client, **overrides):
    return client.post(reverse("takehome:packet-create"), form_data(**overrides))


@pytest.mark.parametrize("requirements, words", [
    ("requests @ https://example.com/requests.whl\n", "line 1"),
    ("six==1.17.0\n./local-package\n", "line 2"),
    ("-e git+https://example.com/x.git#egg=x\n", "line 1"),
    ("six>=1.0\n", "six"),
    ("--index-url https://evil.example.com/simple\nsix==1.17.0\n", "line 1"),
    ("six==1.17.0\n" + "# padding\n" * 120_000, "requirements"),
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
    assert "six==1.17.0</textarea>" in edit


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
    assert "python -m venv .venv" in readme and "python -m pip install pytest -r requirements.txt" in readme
    assert "Python 3.11" in readme
    page = client.get(url("landing", needs)).content.decode()
    assert 'id="environment-step"' in page and "pip install pytest -r requirements.txt" in page


def test_a_packet_without_requirements_downloads_none_and_says_pytest_is_enough(client, started):
    files = unzip(client.get(url("download", started)).content)
    assert "refund-sum/requirements.txt" not in files
    assert "needs nothing else" in files["refund-sum/README.txt"].decode()
    assert 'id="environment-step"' not in client.get(url("landing", started)).content.decode()


def test_check_lists_the_pythons_and_warns_of_one_that_cannot_be_used(settings, tmp_path):
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
    from grading.spec import PacketSpec

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
