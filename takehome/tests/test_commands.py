"""The command-line entry points scripts rely on."""

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from grading.engine.spec import sample_spec
from takehome.models import Invitation, Packet

pytestmark = pytest.mark.django_db


def test_the_sample_packet_loads_twice_without_a_second_version():
    call_command("load_sample_packet", stdout=StringIO())
    out = StringIO()
    call_command("load_sample_packet", stdout=out)
    assert "Already up to date" in out.getvalue()
    packet = Packet.objects.get(slug="refund-sum")
    assert packet.versions.count() == 1


def test_a_recruiters_own_version_of_a_sample_survives_the_next_load(sample_packet, recruiter_client):
    from django.urls import reverse

    from takehome.forms import PacketVersionForm

    base = sample_packet.latest_version()
    data = {name: value for name, value in PacketVersionForm(base=base).initial.items() if value is not None}
    data["prompt"] = base.prompt.replace("\n", "\r\n")  # as a browser sends it, otherwise unchanged
    response = recruiter_client.post(reverse("takehome:packet-edit", args=["refund-sum"]), data)
    assert response.status_code == 302, response.content.decode()[:2000]
    assert sample_packet.latest_version() == base  # the browser's line ends are no change
    data["prompt"] = "Our own words for the task."
    recruiter_client.post(reverse("takehome:packet-edit", args=["refund-sum"]), data)
    call_command("load_sample_packet", stdout=StringIO())
    latest = sample_packet.latest_version()
    assert latest.number == 2 and latest.prompt == "Our own words for the task."


def test_the_sample_packet_in_the_database_is_the_one_on_disk(sample_packet):
    spec = sample_packet.latest_version().to_spec()
    disk = sample_spec()
    assert spec.fixture == disk.fixture
    assert spec.solution == disk.solution
    assert spec.reference_tests == disk.reference_tests
    assert b"abs(int(row" in spec.fixture["invoices.py"]
    assert spec.protected_paths == ("sample.csv",)
    assert set(spec.refusal_hints) == {"dropping rows", "abs", "pandas", "eval", "/etc"}


@pytest.mark.parametrize("slug", ["refund-sum", "business-days"])
def test_every_sample_prompt_forbids_pasting_a_tree_already_green_elsewhere(slug):
    from grading.engine.spec import SAMPLE_PACKETS_DIR
    from takehome.actions import do_load_sample_packet

    packet, _ = do_load_sample_packet(send_check=False, folder=SAMPLE_PACKETS_DIR / slug)
    prompt = " ".join(packet.latest_version().prompt.split())
    assert "You may **not** paste in a finished tree that was already green on your laptop" in prompt


def test_a_changed_rubric_definition_makes_a_new_sample_version(sample_packet, monkeypatch):
    import dataclasses

    from takehome import actions

    _, _, content = actions.sample_content()
    changed = dataclasses.replace(content, rubric_definitions={"red_log": "Pass: FAILED. Fail: green."})
    monkeypatch.setattr(actions, "sample_content", lambda folder: ("refund-sum", "Refunds", changed))
    actions.do_load_sample_packet()
    assert sample_packet.latest_version().rubric_cells()[0].definition == "Pass: FAILED. Fail: green."


def test_invite_prints_the_link_on_the_last_line(sample_packet, client, mailoutbox,
                                                django_capture_on_commit_callbacks):
    out = StringIO()
    with django_capture_on_commit_callbacks(execute=True):
        call_command("invite", "--packet", "refund-sum", "--name", "Ada", "--email", "ada@example.com",
                     stdout=out, stderr=StringIO())
    link = out.getvalue().strip().splitlines()[-1]
    assert link.startswith("http://127.0.0.1:8000/t/")
    invitation = Invitation.objects.get()
    assert invitation.link() == link
    assert len(mailoutbox) == 1
    response = client.get(link.removeprefix("http://127.0.0.1:8000"))
    assert response.status_code == 200 and b"Refunds in the invoice total" in response.content


@pytest.mark.parametrize(
    "args, message",
    [
        (["--packet", "nope", "--name", "A", "--email", "a@example.com"], "No packet with slug 'nope'"),
        (["--packet", "refund-sum", "--name", "A", "--email", "bad"], "not a valid email"),
    ],
)
def test_invite_explains_bad_arguments(sample_packet, args, message):
    with pytest.raises(CommandError, match=message):
        call_command("invite", *args, stdout=StringIO(), stderr=StringIO())


def test_seed_demo_refuses_without_debug(settings):
    settings.DEBUG = False
    with pytest.raises(CommandError, match="DEBUG=true"):
        call_command("seed_demo", stdout=StringIO())


def test_seed_demo_keeps_passwords_between_runs(settings, tmp_path, client):
    settings.DEBUG = True
    settings.VAR_DIR = tmp_path
    first, second = StringIO(), StringIO()
    call_command("seed_demo", stdout=first)
    call_command("seed_demo", stdout=second)
    assert first.getvalue() == second.getvalue()
    password = first.getvalue().split("recruiter")[1].split()[0]
    assert client.login(username="recruiter", password=password)


def test_seed_demo_sets_a_password_again_only_where_it_no_longer_logs_in(settings, tmp_path, client):
    """Each run prints passwords that work, without hashing again the ones that still do (make run runs it)."""
    from django.contrib.auth.models import User

    settings.DEBUG = True
    settings.VAR_DIR = tmp_path

    def seeded() -> dict[str, str]:
        out = StringIO()
        call_command("seed_demo", stdout=out)
        return dict(line.split() for line in out.getvalue().splitlines()[1:])

    def hashes() -> dict[str, str]:
        return dict(User.objects.filter(username__in=["recruiter", "reviewer", "admin"])
                    .values_list("username", "password"))

    printed = seeded()
    first = hashes()
    assert seeded() == printed and hashes() == first  # nothing hashed again
    changed = User.objects.get(username="reviewer")
    changed.set_password("changed by hand")
    changed.save()
    assert seeded() == printed
    assert client.login(username="reviewer", password=printed["reviewer"])
    client.logout()
    assert hashes()["recruiter"] == first["recruiter"]
    (tmp_path / "demo-passwords.json").unlink()  # new passwords for everyone
    printed_again = seeded()
    assert set(printed_again.values()).isdisjoint(printed.values())
    for username, password in printed_again.items():
        assert client.login(username=username, password=password), username
        client.logout()
