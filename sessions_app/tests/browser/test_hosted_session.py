"""Issue 13's "Done when", in Chromium through the real stack: a hosted session from Start to review.

daphne serves takehome.asgi (the page, the terminal's WebSocket, the gate's buttons) in a
forked process; the shell is the real workspace (tmux in bubblewrap, hosted_shell.py);
`manage.py serve_workspaces` answers the gate's socket so ``gate`` works in the terminal; a real
celery worker grades the submission. Nothing is faked: each step is typed or clicked.
"""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from conftest import ROOT, screenshot
from grading.models import Evidence
from grading.tests.browser.test_replay_browser import CURRENT, wait_until
from sessions_app.models import GateReceipt, Submission
from sessions_app.tests.browser.terminal import wait_connected
from sessions_app.tests.test_end_to_end import wait_graded
from takehome.tests.factories import InvitationFactory

from .test_terminal_page import asgi_server  # noqa: F401  (daphne with the real shell)

pytestmark = [pytest.mark.browser, pytest.mark.worker, pytest.mark.django_db(transaction=True)]

REFUND_TEST = [  # typed into `cat > test_invoices.py`, a line at a time
    "from pathlib import Path",
    "",
    "import invoices",
    "",
    'FIXTURE = Path(__file__).parent / "sample.csv"',
    "",
    "",
    "def test_refunds_are_negative_cents_and_lower_the_total():",
    "    # 1000 + 500 + (-200): a refund must reduce the sum",
    "    assert invoices.total(FIXTURE) == 1300",
]


@pytest.fixture
def worker_env(worker_env):
    # why: typed by a script, red to green takes seconds, which the grader calls too fast for a person
    return {**worker_env, "TAKEHOME_MIN_RED_TO_GREEN_S": "0"}


@pytest.fixture
def serve_workspaces(worker_env, shells, settings, tmp_path):
    """`manage.py serve_workspaces`, the gate's socket host, on the test's database and workspaces."""
    env = {**worker_env, "TAKEHOME_WORKSPACES_DIR": str(shells.folder),
           "TAKEHOME_WORKSPACE_UID_BASE": str(settings.WORKSPACE_UID_BASE),
           "TAKEHOME_WORKSPACE_SLOTS": str(settings.WORKSPACE_SLOTS)}
    log = tmp_path / "serve_workspaces.log"
    proc = subprocess.Popen([sys.executable, "manage.py", "serve_workspaces", "--sweep-every", "3600"],
                            cwd=ROOT, env=env, stdout=log.open("ab"), stderr=subprocess.STDOUT)
    yield log
    proc.terminate()
    try:
        proc.wait(120)  # a guard against a hang, not a measurement: it ends the workspaces it serves first
    except subprocess.TimeoutExpired:
        proc.kill()
        raise AssertionError(f"serve_workspaces did not stop on SIGTERM:\n{log.read_text()[-3000:]}") from None


class Terminal:
    def __init__(self, page):
        self.page = page
        self.rows = page.locator("#terminal .xterm-rows")

    def type(self, line: str, enter: bool = True) -> None:
        self.page.locator("#terminal .xterm-helper-textarea").focus()
        self.page.keyboard.type(line)
        if enter:
            self.page.keyboard.press("Enter")

    def press(self, *keys: str) -> None:
        for key in keys:
            self.page.keyboard.press(key)

    def shows(self, pattern: str, timeout: float = 30) -> None:
        try:
            self.rows.get_by_text(re.compile(pattern)).last.wait_for(timeout=timeout * 1000)
        except PlaywrightTimeout:
            raise AssertionError(f"{pattern!r} never showed; the terminal:\n{self.rows.inner_text()}") from None

    def gone(self, pattern: str, timeout: float = 30) -> None:
        """Wait until no row of the screen matches ``pattern`` (a full-screen program has left, say)."""
        try:
            self.rows.get_by_text(re.compile(pattern)).first.wait_for(state="hidden", timeout=timeout * 1000)
        except PlaywrightTimeout:
            raise AssertionError(f"{pattern!r} never left; the terminal:\n{self.rows.inner_text()}") from None

    def run(self, command: str, done: str, timeout: float = 30) -> None:
        """Type ``command`` and wait for the line it prints last (``done``, a regex)."""
        self.type(command)
        self.shows(done, timeout)


def capture(page, button: str) -> str:
    """Press a gate button and wait for the panel's answer, which must be a yes; the answer's words."""
    page.evaluate("document.getElementById('workspace-gate-outcome')?.remove()")
    page.click(f"#{button}")
    outcome = page.locator("#workspace-gate-outcome")
    outcome.wait_for(timeout=90_000)
    words = outcome.inner_text()
    assert outcome.get_attribute("class") == "ok", f"{button}: {words}"
    return words


def test_a_candidate_works_a_hosted_session_and_the_reviewer_replays_it(
        asgi_server, shells, serve_workspaces, celery_worker_proc, sample_packet, page, make_reviewer):  # noqa: F811
    candidate = InvitationFactory(packet_version=sample_packet.latest_version())
    assert candidate.packet_version.work_mode == "both"

    # Start, and choose the hosted workspace on the landing page.
    page.goto(f"{asgi_server}/t/{candidate.raw_token}/")
    page.click("#start-button")
    page.click("#confirm-start")
    page.locator("#countdown").wait_for()
    page.click("#workspace-link")
    wait_connected(page)
    term = Terminal(page)
    term.shows(r"candidate:/workspace\$")  # a person waits for the prompt (typed earlier, the new pane echoes it twice)

    term.run("python -m pytest -q", r"1 failed")
    print(capture(page, "capture-red"))
    red = GateReceipt.objects.get(invitation=candidate, step="red", accepted=True)
    assert red.captured_by == GateReceipt.CapturedBy.SERVER and "FAILED" in red.log_text
    # the list beside the buttons follows the capture (it said "None yet" while the panel said red)
    listed = page.locator("#captures li").all_inner_texts()
    assert len(listed) == 1 and listed[0].startswith("red ") and listed[0].endswith(" accepted"), listed
    screenshot(page, "workspace-terminal")

    # A test that names the bug, the prompt, and the model step (the sample's model is the candidate's own).
    term.type("cat > test_invoices.py")
    for line in REFUND_TEST:
        term.type(line)
    term.press("Control+d")
    term.run("mkdir -p artifacts && echo 'invoices.py wraps cents in abs(); refunds are negative. "
             "Propose a minimal patch; do not drop rows.' > artifacts/prompt.txt; echo prompt-$((6*7))", r"^prompt-42")
    print(capture(page, "capture-model"))
    term.run("echo 'Remove abs() from the sum in total().' > artifacts/model.md; echo reply-$((6*7))", r"^reply-42")

    # The fix, in nano: line 9 is `n += abs(int(row["cents"]))`.
    # Each key waits for nano's answer to the one before: nano reads what has been typed in chunks, so keys sent
    # ahead of its screen can land before the file is read or after it has exited.
    term.type("nano +9 invoices.py")
    term.shows(r"Read \d+ lines")
    term.press("Control+k")
    term.type('            n += int(row["cents"])')
    term.shows(r'^\s+n \+= int\(row\["cents"\]\)\s*$')
    term.press("Control+o")
    term.shows(r"File Name to Write")
    term.press("Enter")
    term.shows(r"Wrote \d+ lines")
    term.press("Control+x")
    term.gone(r"GNU nano")
    term.run("echo abs-left-$(grep -c abs invoices.py)", r"^abs-left-0")
    term.run("python -m pytest -q", r"1 passed")
    term.run("echo 'The model could drop the refund rows so the total looks right; dropping rows changes "
             "revenue and hides the bug.' > artifacts/refuse.md; echo refused-$((6*7))", r"^refused-42")
    # the gate command reaches the server through its socket
    term.run("gate status", r"model\s+accepted \(captured by the server\)")
    print(capture(page, "capture-green"))
    print(capture(page, "workspace-submit"))
    browser = page.context.browser
    page.close()  # why: the candidate is done; its terminal and the server's re-checks would run on through the grading

    submission = Submission.objects.get(invitation=candidate)
    submission = wait_graded(submission.pk, celery_worker_proc)
    assert submission.status == Submission.Status.GRADED, submission.reject_reason
    evidence = Evidence.objects.get(submission=submission).data
    assert evidence["red_log"]["captured_by"] == "server" and evidence["red_log"]["genuine"]

    # The reviewer sees the server's capture and replays the session.
    make_reviewer("rob")
    reviewer = browser.new_page(viewport={"width": 1280, "height": 900})
    reviewer.goto(f"{asgi_server}/")
    reviewer.fill("#id_username", "rob")
    reviewer.fill("#id_password", "pw-rob")
    reviewer.click("button[type=submit]")
    reviewer.wait_for_url(f"{asgi_server}/review/")
    reviewer.goto(f"{asgi_server}/review/{submission.pk}/")
    reviewer.locator("ul.receipts li", has_text="red accepted captured by the server").wait_for()
    reviewer.locator("#section-stamp #replay-player .ap-player").wait_for()
    wait_until(reviewer, f"{CURRENT} !== undefined")
    jump = reviewer.locator("#jump-to-red")
    at = float(jump.get_attribute("data-seek"))
    assert at > 0
    jump.click()
    wait_until(reviewer, f"Math.abs({CURRENT} - {at}) < 0.1")
    wait_until(reviewer, "document.querySelector('#replay-player').innerText.includes('1 failed')")
    reviewer.locator("#replay").scroll_into_view_if_needed()
    screenshot(reviewer, "review-hosted-replay")
    reviewer.close()
