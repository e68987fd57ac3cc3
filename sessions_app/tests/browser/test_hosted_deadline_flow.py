"""Issue 25's "Done when", in Chromium through the real stack: a hosted candidate works the whole session in the
workspace page and never presses Submit; the server submits at the deadline, a real worker grades it, and the
reviewer reads the conversation and the server's own artifacts/model.md.

daphne serves the page, the terminal, the editor's and the chat's requests (in front of the fake upstream, the
only thing outside the project); the shell is the real workspace (tmux in bubblewrap); `serve_workspaces --once`
is the sweep that closes and submits the workspace; a real Celery worker grades. Each step is typed or clicked.
"""

from __future__ import annotations

import io
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone

from grading.models import Evidence
from sessions_app.models import ModelExchange, Submission
from sessions_app.tests.browser.terminal import wait_connected
from sessions_app.tests.conftest import REPLY
from sessions_app.tests.helpers import daphne_serving
from sessions_app.tests.test_end_to_end import last_run, wait_graded
from takehome.models import Invitation
from takehome.tests.factories import InvitationFactory

from ..hosted_shell import shells  # noqa: F401  (the real workspace)
from .test_hosted_session import Terminal, capture

pytestmark = [pytest.mark.browser, pytest.mark.worker, pytest.mark.django_db(transaction=True)]

PROMPT = "invoices.py wraps cents in abs(); refunds are negative. Propose a minimal patch; do not drop rows."
FOLLOW_UP = "And would a test with two refunds still pass?"
REFUND_TEST = '''from pathlib import Path

import invoices

FIXTURE = Path(__file__).parent / "sample.csv"


def test_refunds_are_negative_cents_and_lower_the_total():
    # 1000 + 500 + (-200): a refund must reduce the sum
    assert invoices.total(FIXTURE) == 1300
'''


@pytest.fixture
def worker_env(worker_env):
    # why: typed by a script, red to green takes seconds, which the grader calls too fast for a person
    return {**worker_env, "TAKEHOME_MIN_RED_TO_GREEN_S": "0"}


@pytest.fixture
def served(upstream, settings, shells, monkeypatch):  # noqa: F811
    """daphne with the fake upstream's settings and the real workspaces (set before it forks)."""
    with daphne_serving(settings, monkeypatch) as address:
        yield address


def edit(page, path: str, text: str) -> None:
    """Open ``path`` from the editor's list with the keyboard, put ``text`` in place of what it holds, save."""
    page.locator(f"#editor-file-list button[data-path='{path}']").focus()
    page.keyboard.press("Enter")
    page.locator("#editor-status", has_text=f"Opened {path}").wait_for()
    page.locator("#editor-view .cm-content").click()
    page.keyboard.press("Control+a")
    page.keyboard.insert_text(text)  # as a paste: the editor's own indentation adds nothing
    page.keyboard.press("Control+s")
    page.locator("#editor-status[data-state='saved']", has_text=f"Saved {path}.").wait_for()


def test_a_hosted_candidate_never_presses_submit_and_the_server_submits_at_the_deadline(
        ready, served, shells, celery_worker_proc, upstream, sample_packet, browser, make_reviewer,  # noqa: F811
        settings):  # ready first: the worker is given the media folder it sets
    candidate = InvitationFactory(packet_version=sample_packet.latest_version())
    context = browser.new_context(viewport={"width": 1440, "height": 1000})
    page = context.new_page()
    page.set_default_timeout(20000)
    try:
        page.goto(f"{served}/t/{candidate.raw_token}/")
        page.click("#start-button")
        page.click("#confirm-start")
        page.click("#workspace-link")

        # The task and the clock are in the workspace; nothing leaves the page to read them.
        task = page.locator("details.task-pane")
        assert "Fix the refund total" in task.inner_text()
        page.locator("#countdown").wait_for()

        wait_connected(page)
        page.locator("#terminal").scroll_into_view_if_needed()
        term = Terminal(page)
        term.shows(r"candidate:/workspace\$")
        term.run("python -m pytest -q", r"1 failed")
        capture(page, "capture-red")

        # The chat opens once the server holds red (its pane checks every few seconds); two streamed turns.
        term.run(f"mkdir -p artifacts && echo '{PROMPT}' > artifacts/prompt.txt; echo prompt-$((6*7))", r"^prompt-42")
        page.reload()
        wait_connected(page)
        box = page.get_by_label("Your prompt")
        box.wait_for()
        assert box.input_value().strip() == PROMPT  # it starts from artifacts/prompt.txt
        page.locator("#model-send").click()
        page.locator('#model-history [data-artifact="artifacts/model.md"]').wait_for()
        box.fill(FOLLOW_UP)
        page.locator("#model-send").click()
        page.locator('#model-history [data-artifact="artifacts/model-2.md"]').wait_for()
        assert [e.conversation for e in ModelExchange.objects.filter(invitation=candidate)] == [1, 1]

        # The test and the fix, in the editor; the tests run green in the terminal.
        edit(page, "test_invoices.py", REFUND_TEST)
        fixed = (sample_packet.latest_version().to_spec().fixture["invoices.py"].decode()
                 .replace('abs(int(row["cents"]))', 'int(row["cents"])'))
        assert "abs(" not in fixed
        edit(page, "invoices.py", fixed)
        page.locator("#terminal").scroll_into_view_if_needed()
        term.run("python -m pytest -q", r"1 passed")
        term.run("echo 'The model could drop the refund rows so the total looks right; that changes revenue "
                 "and hides the bug.' > artifacts/refuse.md; echo refused-$((6*7))", r"^refused-42")
        capture(page, "capture-green")
    finally:
        context.close()
    assert not Submission.objects.filter(invitation=candidate).exists()  # Submit was never pressed

    # Uploads close (the deadline plus grace); the sweep freezes the workspace and submits it.
    Invitation.objects.filter(pk=candidate.pk).update(
        deadline=timezone.now() - timedelta(seconds=settings.UPLOAD_GRACE_S + 1))
    call_command("serve_workspaces", "--once", stdout=io.StringIO())
    submission = Submission.objects.get(invitation=candidate)
    assert submission.at_deadline and submission.via == "hosted"
    submission = wait_graded(submission.pk, celery_worker_proc)
    assert submission.status == Submission.Status.GRADED, (
        submission.reject_reason or last_run(submission.pk).error, celery_worker_proc.output()[-3000:])
    evidence = Evidence.objects.get(submission=submission).data
    assert evidence["red_log"]["captured_by"] == "server" and evidence["red_log"]["genuine"]
    assert evidence["texts"]["model.md"] == REPLY  # written by the server, never copied by hand

    # The reviewer sees it marked as submitted at the deadline, with the whole conversation.
    make_reviewer("rob")
    reviewer = browser.new_page(viewport={"width": 1280, "height": 900})
    try:
        reviewer.goto(f"{served}/")
        reviewer.fill("#id_username", "rob")
        reviewer.fill("#id_password", "pw-rob")
        reviewer.click("button[type=submit]")
        reviewer.wait_for_url(f"{served}/review/")
        assert "submitted at the deadline" in reviewer.locator("tbody#queue-rows").inner_text()
        reviewer.goto(f"{served}/review/{submission.pk}/")
        reviewer.locator(".status-at-deadline").first.wait_for()
        window = reviewer.locator("body").inner_text()
        assert "(Conversation 1, turn 1)" in window and "(Conversation 1, turn 2)" in window
        written = reviewer.locator("[data-artifact]").all_text_contents()  # inside each exchange's fold
        assert [w.split("reply in ")[1].strip(" .") for w in written] == ["artifacts/model.md", "artifacts/model-2.md"]
    finally:
        reviewer.close()
