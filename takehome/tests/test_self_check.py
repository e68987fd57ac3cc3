"""A packet checks itself in the sandbox before it can be invited to (takehome/selfcheck.py)."""

from io import StringIO
from unittest.mock import patch

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from takehome.actions import (
    InviteError,
    InviteRow,
    VersionContent,
    do_create_packet,
    do_create_version,
    do_invite_candidates,
    do_resend_stale_checks,
    do_run_packet_check,
)
from takehome.models import Invitation, PacketCheck, PacketVersion

pytestmark = pytest.mark.django_db

BUG = b"def add(a, b):\n    return a - b\n"
FIX = b"def add(a, b):\n    return a + b\n"
OWN_TEST = b"import calc\n\ndef test_two_and_two():\n    assert calc.add(2, 2) == 4\n"
HIDDEN = b"import calc\n\ndef test_adds():\n    assert calc.add(2, 3) == 5\n    assert calc.add(-1, 1) == 0\n"
SPECIAL_CASE = b"def add(a, b):\n    if (a, b) == (2, 2):\n        return 4\n    return a - b\n"


def content(**overrides) -> VersionContent:
    fields = {
        "prompt": "Fix add.",
        "fixture": {"calc.py": BUG, "test_calc.py": OWN_TEST},
        "solution": {"calc.py": FIX},
        "reference_tests": {"test_hidden_calc.py": HIDDEN},
        "decoys": {"special-case": {"calc.py": SPECIAL_CASE}},
    }
    fields.update(overrides)
    return VersionContent(**fields)


def checked(slug: str, **overrides) -> PacketVersion:
    """A packet created through the recruiter's action, its queued self-check run as a worker would."""
    packet = do_create_packet(slug, slug.title(), content(**overrides))
    version = packet.latest_version()
    assert version.state == PacketVersion.CHECKING
    queued = version.checks.get()
    do_run_packet_check(queued.pk)
    return PacketVersion.objects.get(pk=version.pk)


def failed_ids(version: PacketVersion) -> set[str]:
    return {r["check_id"] for r in version.last_check().failed_checks()}


def test_a_sound_packet_is_published():
    version = checked("sound")
    assert version.state == PacketVersion.PUBLISHED
    check = version.last_check()
    assert check.status == PacketCheck.Status.PASSED
    assert [r["check_id"] for r in check.results] == [
        "environment", "fixture_red", "hidden_red_on_fixture", "hidden_green_on_solution", "decoys_red"]
    assert "pytest alone" in check.results[0]["summary"]  # no requirements: the shared runner
    assert "1 failed" in check.results[1]["log"]  # the sandbox's own pytest output is kept


@pytest.mark.parametrize("slug, overrides, failing", [
    ("green-fixture", {"fixture": {"calc.py": BUG, "test_calc.py": b"import calc\n\ndef test_zero():\n"
                                                                    b"    assert calc.add(2, 2) == 0\n"}},
     {"fixture_red"}),
    ("wrong-solution", {"solution": {"calc.py": b"def add(a, b):\n    return a * b\n"}},
     {"hidden_green_on_solution"}),
    ("blind-hidden-tests", {"reference_tests": {"test_hidden_calc.py": b"import calc\n\ndef test_zero():\n"
                                                                       b"    assert calc.add(0, 0) == 0\n"}},
     {"hidden_red_on_fixture", "decoys_red"}),
    ("decoy-gets-through", {"decoys": {"special-case": {"calc.py": SPECIAL_CASE}, "right-after-all": {"calc.py": FIX}}},
     {"decoys_red"}),
    ("no-hidden-tests", {"reference_tests": {}, "decoys": {}},
     {"hidden_red_on_fixture", "hidden_green_on_solution", "decoys_red"}),
])
def test_a_broken_packet_is_a_draft_naming_the_failing_check(slug, overrides, failing):
    version = checked(slug, **overrides)
    assert version.state == PacketVersion.DRAFT
    assert failed_ids(version) == failing
    for result in version.last_check().failed_checks():
        assert result["summary"]
    if slug == "decoy-gets-through":
        assert "right-after-all" in version.last_check().results[4]["summary"]
        assert "special-case" not in version.last_check().results[4]["summary"]


def test_a_draft_cannot_be_invited_to(client, recruiter):
    version = checked("green-fixture", fixture={"calc.py": BUG, "test_calc.py": b"def test_ok():\n    pass\n"})
    with pytest.raises(InviteError) as refused:
        do_invite_candidates(version, [InviteRow(1, "Ada", "ada@example.com")], send=False)
    assert "draft" in refused.value.messages[0]
    with pytest.raises(CommandError, match="draft"):
        call_command("invite", "--packet", "green-fixture", "--name", "Ada", "--email", "ada@example.com",
                     "--no-email", stdout=StringIO(), stderr=StringIO())
    client.force_login(recruiter)
    url = reverse("takehome:packet-invite", args=["green-fixture"])
    page = client.get(url).content.decode()
    assert "is a draft: its self-check failed" in page
    response = client.post(url, {"lines": "Ada, ada@example.com"})
    assert response.status_code == 200
    assert "is a draft" in response.content.decode()
    assert not Invitation.objects.exists()


def test_a_version_still_checking_cannot_be_invited_to():
    packet = do_create_packet("pending", "Pending", content())
    with pytest.raises(InviteError, match="still being checked"):
        do_invite_candidates(packet.latest_version(), [InviteRow(1, "Ada", "ada@example.com")], send=False)


def test_the_packet_page_shows_each_check_and_its_log_and_the_list_marks_what_is_not_published(client, recruiter):
    version = checked("wrong-solution", solution={"calc.py": b"def add(a, b):\n    return a * b\n"})
    client.force_login(recruiter)
    page = client.get(version.packet.get_absolute_url()).content.decode()
    assert "Draft: not invitable" in page
    assert page.count('class="check ok"') == 4 and page.count('class="check bad"') == 1
    assert "Failed: The hidden tests pass on the reference solution" in page
    assert "assert 6 == 5" in page  # the failing run's log
    assert "hx-trigger" not in page.split('id="packet-check"')[1].split("</section>")[0]

    do_create_packet("pending", "Pending", content())
    page = client.get(reverse("takehome:packet-list")).content.decode()
    assert 'class="status status-draft">Draft<' in page
    assert 'class="status status-checking">Checking<' in page


def test_the_check_section_polls_while_checking_and_answers_htmx_alone(client, recruiter):
    packet = do_create_packet("pending", "Pending", content())
    client.force_login(recruiter)
    url = packet.get_absolute_url() + "?v=1&part=check"
    fragment = client.get(url, headers={"HX-Request": "true"}).content.decode()
    assert "<html" not in fragment
    assert 'id="packet-check"' in fragment and 'hx-trigger="every 2s"' in fragment
    assert "Checking" in fragment
    do_run_packet_check(packet.latest_version().checks.get().pk)
    fragment = client.get(url, headers={"HX-Request": "true"}).content.decode()
    assert "hx-trigger" not in fragment and "Published" in fragment


def test_a_check_that_finishes_while_the_page_is_read_is_shown_in_one_state(client, recruiter):
    """The check finishes between the page's reads of it: the page shows it running or done, never both
    ("Published" above "A worker is running the packet", as the page once did under load)."""
    from django.db import connection
    from django.utils import timezone

    packet = do_create_packet("racing", "Racing", content())
    running = packet.latest_version().checks.get()
    PacketCheck.objects.filter(pk=running.pk).update(status=PacketCheck.Status.RUNNING, started_at=timezone.now())
    done = [{"check_id": "fixture_red", "passed": True, "title": "The fixture's own tests fail", "summary": "1 failed",
             "log": ""}]
    finished = False

    def finish_after_the_first_read(execute, sql, params, many, context):
        nonlocal finished
        result = execute(sql, params, many, context)
        if not finished and sql.lstrip().upper().startswith("SELECT") and "takehome_packetcheck" in sql:
            finished = True  # before the update, which comes through here too
            PacketCheck.objects.filter(pk=running.pk).update(status=PacketCheck.Status.PASSED, results=done,
                                                             finished_at=timezone.now())
        return result

    client.force_login(recruiter)
    url = packet.get_absolute_url() + "?v=1&part=check"
    with connection.execute_wrapper(finish_after_the_first_read):
        fragment = client.get(url, headers={"HX-Request": "true"}).content.decode()
    assert finished
    assert ("Published" in fragment) == ('class="check ok"' in fragment), fragment
    assert ("Checking…" in fragment) == ("A worker is running the packet" in fragment), fragment
    fragment = client.get(url, headers={"HX-Request": "true"}).content.decode()
    assert "Published" in fragment and 'class="check ok"' in fragment and "hx-trigger" not in fragment


def test_a_version_from_before_self_checks_stays_invitable_and_can_be_checked(client, recruiter,
                                                                              django_capture_on_commit_callbacks):
    packet = do_create_packet("legacy", "Legacy", content())
    version = packet.latest_version()
    version.checks.all().delete()  # as a database migrated from before self-checks has it
    assert version.state == PacketVersion.UNCHECKED
    assert version.refusal_to_invite() is None
    client.force_login(recruiter)
    page = client.get(packet.get_absolute_url()).content.decode()
    assert "made before packets checked themselves" in page and "Run the self-check" in page
    with patch("shared.publish.send", return_value=True) as send, \
            django_capture_on_commit_callbacks(execute=True):
        response = client.post(reverse("takehome:packet-check", args=["legacy"]) + "?v=1")
    assert response.status_code == 302
    check = version.checks.get()
    assert check.status == PacketCheck.Status.QUEUED
    assert send.call_args.args[1] == (check.pk,)


def test_a_new_version_queues_its_check_after_commit(django_capture_on_commit_callbacks):
    with patch("shared.publish.send", return_value=True) as send, \
            django_capture_on_commit_callbacks(execute=True):
        packet = do_create_packet("queued", "Queued", content())
    assert send.call_args.args[1] == (packet.latest_version().checks.get().pk,)


def test_the_sweep_sends_again_a_check_whose_message_was_lost():
    packet = do_create_packet("lost", "Lost", content())
    check = packet.latest_version().checks.get()
    with patch("shared.publish.send", return_value=True) as send:
        assert do_resend_stale_checks() == 0  # just queued: give the first message a chance
        PacketCheck.objects.filter(pk=check.pk).update(created_at=check.created_at.replace(year=2000))
        assert do_resend_stale_checks() == 1
    assert send.call_args.args[1] == (check.pk,)


def test_check_packet_exits_zero_only_when_every_check_passes():
    call_command("load_sample_packet", "--no-check", stdout=StringIO())
    out = StringIO()
    call_command("check_packet", "refund-sum", "--version", "1", stdout=out)
    assert out.getvalue().count("PASS  ") == 5
    assert PacketVersion.objects.get(packet__slug="refund-sum").state == PacketVersion.PUBLISHED
    do_create_packet("wrong", "Wrong", content(solution={"calc.py": b"def add(a, b):\n    return a * b\n"}))
    out = StringIO()
    with pytest.raises(CommandError, match="draft"):
        call_command("check_packet", "wrong", "--logs", stdout=out)
    assert "FAIL  The hidden tests pass on the reference solution" in out.getvalue()
    assert "assert 6 == 5" in out.getvalue()
    with pytest.raises(CommandError, match="no version 7"):
        call_command("check_packet", "wrong", "--version", "7", stdout=StringIO())
    with pytest.raises(CommandError, match="No packet with slug 'nope'"):
        call_command("check_packet", "nope", stdout=StringIO())


def test_load_sample_packet_checks_the_sample_here_and_publishes_it(django_capture_on_commit_callbacks):
    """make's set-up runs it before any broker is up: a check it runs itself is sent nowhere."""
    out = StringIO()
    with patch("shared.publish.send", return_value=False) as send, \
            django_capture_on_commit_callbacks(execute=True):
        call_command("load_sample_packet", stdout=out)
    assert "Self-check: passed" in out.getvalue()
    assert not send.called
    assert PacketVersion.objects.get(packet__slug="refund-sum").state == PacketVersion.PUBLISHED


@pytest.fixture
def no_runner(settings):
    """No sandbox here: the runner is missing. The warm pool made for it retries for ever; it ends with the test."""
    from grading.engine.sandbox import close_warm_sandboxes

    settings.GRADING_RUNNER_DIR = settings.VAR_DIR / "no-such-runner"
    yield
    close_warm_sandboxes()


def test_load_sample_packet_without_a_sandbox_hands_the_check_to_a_worker(no_runner,
                                                                            django_capture_on_commit_callbacks):
    out = StringIO()
    with patch("shared.publish.send", return_value=True) as send, \
            django_capture_on_commit_callbacks(execute=True):
        call_command("load_sample_packet", stdout=out)
    check = PacketVersion.objects.get(packet__slug="refund-sum").checks.get()
    assert send.call_count == 1 and send.call_args.args[1] == (check.pk,)
    assert check.status == PacketCheck.Status.QUEUED and "a worker will run the self-check" in out.getvalue()


def test_load_sample_packet_checks_a_sample_from_before_self_checks():
    call_command("load_sample_packet", "--no-check", stdout=StringIO())
    version = PacketVersion.objects.get(packet__slug="refund-sum")
    version.checks.all().delete()  # as an install migrated from before self-checks has it
    out = StringIO()
    call_command("load_sample_packet", stdout=out)
    assert "Already up to date" in out.getvalue() and "Self-check: passed" in out.getvalue()
    assert version.state == PacketVersion.PUBLISHED


def test_a_check_that_cannot_start_the_sandbox_says_so_and_leaves_a_draft(no_runner):
    packet = do_create_packet("nosandbox", "No sandbox", content())
    check = do_run_packet_check(packet.latest_version().checks.get().pk)
    assert check.status == PacketCheck.Status.ERROR
    assert "sandbox could not start" in check.error and "Run the self-check again" in check.error
    assert "could not run" in packet.latest_version().refusal_to_invite()


# --- a red run is a test that failed, not a run that said "failed" ----------------------------------


def ran(outcome: str, **counts):
    """A sandboxed run's result as the sandbox reports it, with no test unless counted."""
    from grading.engine.sandbox import RunResult

    numbers = dict.fromkeys(("passed", "failed", "errors", "skipped", "xfailed", "xpassed"), 0)
    numbers.update(counts)
    return RunResult(outcome=outcome, exit_code=1, duration_s=0.1, log="", **numbers)


class EveryRun:
    """A sandbox whose every run ends as ``result`` (no packet code runs)."""

    def __init__(self, result):
        self.result = result

    def run(self, tree, command):
        return self.result


def test_runs_that_failed_with_no_test_reported_pass_no_check():
    from grading.engine.spec import PacketSpec
    from takehome.selfcheck import check_packet

    spec = PacketSpec("calc", 1, {"calc.py": BUG, "test_calc.py": OWN_TEST}, {"calc.py": FIX},
                      {"test_hidden_calc.py": HIDDEN}, decoys={"special-case": {"calc.py": SPECIAL_CASE}})
    checks = check_packet(spec, EveryRun(ran("failed")))
    assert [c.passed for c in checks] == [False, False, False, False]
    assert "no tests reported" in checks[0].summary and "not a red run" in checks[0].summary
    assert "special-case" in checks[3].summary
    checks = check_packet(spec, EveryRun(ran("failed", failed=1)))
    assert [c.passed for c in checks] == [True, True, False, True]


def test_a_decoy_is_rejected_only_when_the_hidden_tests_ran():
    from takehome.selfcheck import _decoys

    check = _decoys({"caught": ran("failed", failed=1), "crashes-them": ran("error", errors=1),
                     "nothing-ran": ran("failed"), "error-before-any-test": ran("error")})
    assert not check.passed
    assert "error-before-any-test, nothing-ran." in check.summary
    assert "caught" not in check.summary and "crashes-them" not in check.summary


def test_a_newer_draft_sends_invitations_to_the_last_published_version_and_says_so(client, recruiter):
    first = checked("sound")
    broken = do_create_version(first.packet, content(solution={"calc.py": b"def add(a, b):\n    return a * b\n"}))
    do_run_packet_check(broken.checks.get().pk)
    assert PacketVersion.objects.get(pk=broken.pk).state == PacketVersion.DRAFT
    assert first.packet.invitable_version() == first
    client.force_login(recruiter)
    url = reverse("takehome:packet-invite", args=["sound"])
    page = client.get(url).content.decode()
    assert 'id="invite-earlier-version"' in page and "get <strong>version 1</strong>" in page
    assert 'id="invite-refused"' not in page
    client.post(url, {"lines": "Ada, ada@example.com"})
    assert Invitation.objects.get().packet_version == first
    err = StringIO()
    call_command("invite", "--packet", "sound", "--name", "Bo", "--email", "bo@example.com", "--no-email",
                 stdout=StringIO(), stderr=err)
    assert "Inviting to version 1" in err.getvalue()
    assert Invitation.objects.get(candidate__email="bo@example.com").packet_version == first
