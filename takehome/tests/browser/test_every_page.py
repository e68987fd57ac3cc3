"""Every page of all three roles in headless Chromium (the list is in site_pages.py):

- the Content-Security-Policy holds: not one violation (no inline script or style, no eval);
- axe-core finds no serious or critical accessibility violation, at a desktop's width and at a phone's;
- at 390 px wide (a phone) no page is wider than the screen: wide tables scroll in their own box;
- at 1280 px (a desktop) no table is cut off inside its scroll box.

One walk over one set-up site checks all three and reports every page's problems at once.
"""

from __future__ import annotations

from datetime import timedelta
from unittest.mock import patch

import pytest
from axe_playwright_python.sync_playwright import Axe
from django.test import Client
from django.utils import timezone

from takehome.tests.browser.site_pages import PAGES, Site, SitePage

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PHONE_WIDTH = 390
DESKTOP_WIDTH = 1280
# why an init script: a violation is also a console message, but the event names the
# directive and the blocked URL, and it is seen even when the console is noisy.
RECORD_CSP = """
window.__csp = [];
document.addEventListener("securitypolicyviolation", (e) => {
  window.__csp.push(e.violatedDirective + " blocked " + (e.blockedURI || "inline") +
                    (e.sourceFile ? " (" + e.sourceFile + ":" + e.lineNumber + ")" : ""));
});
"""


def build_site(make_reviewer, recruiter) -> tuple[Site, dict]:
    """A packet, candidates at each stage and a scored upload; the people who look at them.

    The hosted session's recording is written under settings.WORKSPACES_DIR: point it at a test folder first.
    """
    from django.contrib.auth.models import User

    from grading import similarity
    from grading.engine.spec import SAMPLE_PACKETS_DIR
    from grading.models import Submission
    from grading.tests.casts import cast_for
    from grading.tests.reviewing import make_submission, score
    from sessions_app.actions import do_start_session
    from takehome.actions import do_load_sample_packet, do_revoke_invitation
    from takehome.models import Invitation
    from takehome.tests.factories import InvitationFactory

    packet, _ = do_load_sample_packet()
    version = packet.latest_version()
    packages, _ = do_load_sample_packet(send_check=False, folder=SAMPLE_PACKETS_DIR / "business-days")
    on_packages = InvitationFactory(packet_version=packages.latest_version())
    do_start_session(on_packages)
    rob, ann = make_reviewer("rob"), make_reviewer("ann")
    fresh = InvitationFactory(packet_version=version)
    started = InvitationFactory(packet_version=version)
    do_start_session(started)
    in_grace, closed = (InvitationFactory(packet_version=version) for _ in range(2))
    for invitation, ago in ((in_grace, timedelta(minutes=1)), (closed, timedelta(hours=3))):
        do_start_session(invitation)
        Invitation.objects.filter(pk=invitation.pk).update(deadline=timezone.now() - ago)
    frozen_workspace(closed)
    revoked = InvitationFactory(packet_version=version)
    do_revoke_invitation(revoked)
    ada = make_submission(packet, "Ada Lovelace")
    grace = make_submission(packet, "Grace Hopper")
    score(grace, rob, dict(red_log=True, model_waited=True, refusal_specific=True, test_names_bug=True))
    score(grace, ann, dict(red_log=True, model_waited=False, refusal_specific=True, test_names_bug=True),
          notes={"model_waited": "the stamp came after the fix"})
    # Ada's review is under way: two cells scored, two to go.
    score(ada, rob, dict(red_log=True, model_waited=False), submit=False)
    chat, chat_review = model_window_pages(started_at=timezone.now())
    replayed = make_submission(packet, "Hedy Lamarr")
    # why at the deadline: the board, the queue and the review page show the server's submit marked so
    Submission.objects.filter(pk=replayed.pk).update(via="hosted", at_deadline=True,
                                                     earlier_submit_at=timezone.now() - timedelta(hours=1))
    cast_for(replayed)
    # the same evidence each: every one lists the others as similar (Grace's page and the debrief show them)
    for s in (ada, grace, replayed):
        similarity.record(s.pk)
    draft = draft_packet()
    set_password_link = set_password_path(make_reviewer("nell"))
    site = Site(
        slug=packet.slug, fresh_token=fresh.raw_token, started_token=started.raw_token,
        grace_token=in_grace.raw_token, closed_token=closed.raw_token,
        submitted_token=ada.invitation.link_token(), submission_id=ada.pk, scored_id=grace.pk,
        recruiter_id=recruiter.pk, packages_slug=packages.slug, packages_token=on_packages.raw_token,
        chat_token=chat.raw_token, chat_review_id=chat_review.pk, replay_review_id=replayed.pk, draft_slug=draft.slug,
        set_password_path=set_password_link, person_id=grace.invitation.candidate_id,
    )
    people = {"recruiter": recruiter, "reviewer": rob, "norole": User.objects.create_user("nora", password="x"),
              "staff": User.objects.create_superuser("sam", password="x")}
    return site, people


def frozen_workspace(invitation) -> None:
    """A hosted workspace frozen at the deadline, its files saved (no sandbox needed to show them read-only)."""
    from sessions_app.tests.test_workspace_closed import frozen

    frozen(invitation, {"invoices.py": b"def total(rows):\n    return sum(r['cents'] for r in rows)\n",
                        "artifacts/refuse.md": b"Dropping the refund rows would hide the bug.\n"})


def model_window_pages(started_at):
    """A packet whose model the server provides: a candidate past red with an exchange on record,
    and a graded upload whose evidence carries that exchange (the review page's model window)."""
    from grading.models import Evidence, Submission
    from grading.tests.reviewing import ideal_evidence
    from sessions_app.actions import do_start_session
    from sessions_app.models import GateReceipt, ModelExchange
    from takehome.tests.factories import InvitationFactory, make_packet

    chat = make_packet(slug="chat", title="Chat packet", model_policy="provided", work_mode="both")
    invitation = InvitationFactory(packet_version=chat.latest_version())
    do_start_session(invitation)
    GateReceipt.objects.create(invitation=invitation, step="red", accepted=True, captured_by="server")
    prompt = "add(2, 2) returns 0: which line is wrong?"
    ModelExchange.objects.create(invitation=invitation, messages=[{"role": "user", "content": prompt}],
                                 reply="Line 2 subtracts; it should add.", model="small-model",
                                 tokens_in=12, tokens_out=9, latency_s=1.4)
    ModelExchange.objects.create(  # a second turn whose reply is Markdown: a list and a long code line
        invitation=invitation, model="small-model", tokens_in=30, tokens_out=40, latency_s=2.0,
        messages=[{"role": "user", "content": prompt}, {"role": "assistant", "content": "Line 2 subtracts."},
                  {"role": "user", "content": "Show the fix."}],
        reply="**The fix**:\n\n- add, do not subtract\n- keep `add`'s name\n\n```python\ndef add(a, b):\n"
              "    return a + b  # " + "a long comment that scrolls sideways " * 4 + "\n```\n")
    evidence = ideal_evidence()
    exchange = {"at": started_at.isoformat(), "messages": [{"role": "user", "content": prompt}],
                "reply": "Line 2 subtracts; it should add.", "model": "small-model", "tokens_in": 12,
                "tokens_out": 9, "latency_s": 1.4, "error": ""}
    evidence["model"] = {"policy": "provided", "configured": True, "exchanges": [exchange],
                         "prompt_matches": {"result": "matches", "exchange": 1, "diff": ""},
                         "reply_matches": {"result": "differs", "exchange": 1,
                                           "diff": "--- exchange 1 (server)\n+++ artifacts/model.md\n@@ -1 +1 @@\n"
                                                   "-Line 2 subtracts; it should add.\n+Line 2 is wrong.\n"}}
    submission = Submission.objects.create(invitation=invitation, archive="uploads/chat.zip", sha256="c" * 64,
                                           size=100, status=Submission.Status.GRADED)
    Evidence.objects.create(submission=submission, data=evidence, grader_version="1")
    return invitation, submission


def draft_packet():
    """A packet whose self-check failed: a draft, its page showing each check with the failing one's log."""
    from takehome.models import PacketCheck
    from takehome.tests.factories import make_packet

    draft = make_packet(slug="draft", title="Draft packet", checked=False)
    version = draft.latest_version()
    version.checks.all().delete()
    ok = {"passed": True, "log": "1 failed in 0.02s\n"}
    PacketCheck.objects.create(version=version, status=PacketCheck.Status.FAILED, finished_at=timezone.now(), results=[
        {"check_id": "fixture_red", "title": "The fixture's own tests fail", "passed": False,
         "summary": "The fixture's own tests pass (1 passed): they must fail, or there is no bug to find.",
         "log": ".                                                              [100%]\n1 passed in 0.02s\n"},
        {"check_id": "hidden_red_on_fixture", "title": "The hidden tests fail on the fixture",
         "summary": "The hidden tests over the fixture fail as they must (1 failed).", **ok},
        {"check_id": "hidden_green_on_solution", "title": "The hidden tests pass on the reference solution",
         "summary": "The hidden tests pass on the reference solution (1 passed).", **ok},
        {"check_id": "decoys", "title": "Every decoy fails the hidden tests", "passed": True,
         "summary": "The packet has no decoys: nothing to check.", "log": ""},
    ])
    return draft


def set_password_path(user) -> str:
    """A working set-password link, as the team's invitation emails it."""
    from django.contrib.auth.tokens import default_token_generator
    from django.utils.encoding import force_bytes
    from django.utils.http import urlsafe_base64_encode

    return f"/accounts/set-password/{urlsafe_base64_encode(force_bytes(user.pk))}/{default_token_generator.make_token(user)}/"


def session_cookie(user, live_server) -> list[dict]:
    client = Client()
    client.force_login(user)
    return [{"name": "sessionid", "value": client.cookies["sessionid"].value, "url": live_server.url}]


class Tab:
    """One tab for the walk, sent from page to page as a person clicking through would be; before the next
    person's page it logs in as them: their session cookie alone, and nothing the last person's pages kept.

    why one tab, not one per person or per page: each tab started a renderer process and each person's
    context an empty cache, which cost the browser more CPU than drawing the pages did; a same-site
    navigation keeps the tab's process and its cache of the site's scripts and styles.
    """

    def __init__(self, context, live_server, people: dict):
        self.context = context
        self.live_server = live_server
        self.people = people
        self.role: str | None = None  # a new context holds no cookie: anyone's pages
        self.page = context.new_page()
        self.page.set_default_timeout(15000)
        self.width = DESKTOP_WIDTH
        self.console: list[str] = []
        self.page.on("console", lambda m: self.console.append(m.text) if "Content Security Policy" in m.text else None)

    def log_in_as(self, role: str | None) -> None:
        if role == self.role:
            return
        self.context.clear_cookies()
        if role is not None:
            self.context.add_cookies(session_cookie(self.people[role], self.live_server))
        # why: a fold or a shortcut turned off is kept in the browser's storage; the next person starts without
        if self.page.url.startswith(self.live_server.url):
            self.page.evaluate("() => { localStorage.clear(); sessionStorage.clear(); }")
        self.role = role

    def visit(self, site: Site, entry: SitePage):
        """Open the page; returns it and its CSP console messages, or raises AssertionError with what went wrong."""
        page = self.page
        self.log_in_as(entry.role)
        self.console.clear()
        url = self.live_server.url + entry.path(site)
        # goto returns once the page's load event has fired: its deferred scripts have run by then.
        if entry.raises:
            target, exception = entry.raises
            with patch(target, side_effect=exception()):
                response = page.goto(url)
        else:
            response = page.goto(url)
        for selector in entry.ready:
            page.locator(selector).first.wait_for()
        status = response.status if response else None
        if status != entry.status:
            raise AssertionError(f"answered {status}, not {entry.status}")
        return page, self.console

    def resize(self, width: int) -> None:
        """The window made ``width`` wide, once the page has laid itself out again: a terminal refits itself
        a moment after the window's last resize event (static/sessions_app/terminal.js), then two frames."""
        self.page.set_viewport_size({"width": width, "height": 900})
        self.page.wait_for_function(REFITTED, arg=width)
        self.page.evaluate("() => new Promise(done => requestAnimationFrame(() => requestAnimationFrame(done)))")
        self.width = width


REFITTED = """(width) => { const box = document.getElementById("terminal");
                             return !box || !box.xterm || box.dataset.fittedWidth === String(width); }"""


# why in parts: the walk takes minutes; each part builds the site for itself, and parallel test processes
# take one each. A page's part is its place in PAGES, so every page is in exactly one.
PARTS = 4


def checks_at(width: int, page, axe, label: str, entry: SitePage) -> list[str]:
    """The problems of the page as it is laid out at ``width``: what does not fit, and axe-core's findings."""
    problems = []
    if width == DESKTOP_WIDTH:
        # At a desktop width no table needs its scroll box: every control of a row is in view.
        cut = page.evaluate(CUT_TABLES)
        problems += [f"{label}: at {width} px a table is cut off inside its scroll box: {c}" for c in cut]
    else:
        label = f"{label} at {width} px"
        scrolled = page.evaluate("document.documentElement.scrollWidth")
        if scrolled > width:
            widest = page.evaluate(WIDEST_ELEMENT, width)
            problems.append(f"{label}: {scrolled} px wide at {width} px (sticks out: {widest})")
    # why at both widths: only at a phone's do the wide tables scroll in their boxes, and some findings
    # (a scroll box the keyboard cannot reach, for one) exist only then.
    if entry.axe:
        problems += axe_problems(axe, page, label)
    return problems


@pytest.mark.parametrize("part", range(PARTS), ids=lambda n: f"part {n + 1} of {PARTS}")
def test_every_page_passes_csp_axe_and_fits_a_phone(live_server, browser, recruiter, make_reviewer, settings,
                                                    tmp_path, part):
    """Each page is opened once and checked at both widths, the window resized between them.

    why resized, not opened again at the other width: the second load drew the page twice over for the
    same layout. A person's window or turned phone resizes a page too, and the tab keeps the width its last
    page ended at, so the pages are opened at a desktop's width and a phone's in turn.
    """
    # The model window is open only where an upstream is configured; nothing here calls it.
    settings.MODEL_URL = "http://127.0.0.1:9/v1"
    settings.WORKSPACES_DIR = tmp_path / "workspaces"
    site, people = build_site(make_reviewer, recruiter)
    axe = Axe()
    problems: list[str] = []
    context = browser.new_context(viewport={"width": DESKTOP_WIDTH, "height": 900})
    try:
        context.add_init_script(RECORD_CSP)
        tab = Tab(context, live_server, people)
        for entry in PAGES[part::PARTS]:
            label = f"{entry.name} ({entry.path(site)})"
            try:
                page, console = tab.visit(site, entry)
            except AssertionError as exc:
                problems.append(f"{label} at {tab.width} px: {exc}")
                continue
            problems += checks_at(tab.width, page, axe, label, entry)
            tab.resize(PHONE_WIDTH if tab.width == DESKTOP_WIDTH else DESKTOP_WIDTH)
            problems += checks_at(tab.width, page, axe, label, entry)
            violations = page.evaluate("window.__csp") + console
            problems += [f"{label}: CSP: {v}" for v in dict.fromkeys(violations)]
    finally:
        context.close()
    assert not problems, f"{len(problems)} problems:\n" + "\n".join(problems)


# why only violations: axe-core then details the nodes of what fails alone, not of every rule that passes (about
# a quarter of the browser's CPU per run on a long page); what it finds is the same.
AXE_OPTIONS = {"resultTypes": ["violations"]}


def axe_problems(axe, page, label: str) -> list[str]:
    """axe-core's serious and critical findings on the page, one line each."""
    # why only when missing: the script (570 kB, sent and compiled each time) is put into a page once, and
    # the page's run at its second width finds it still there.
    if not page.evaluate("() => typeof window.axe?.run === 'function'"):
        page.evaluate(axe.axe_script)
    problems = []
    for rule in page.evaluate("(options) => axe.run(document, options)", AXE_OPTIONS)["violations"]:
        if rule["impact"] in ("serious", "critical"):
            where = ", ".join(" ".join(node["target"]) for node in rule["nodes"][:3])
            problems.append(f"{label}: axe {rule['impact']} {rule['id']}: {rule['help']} at {where}")
    return problems


CUT_TABLES = """
() => [...document.querySelectorAll(".table-scroll")]
  .filter(box => box.scrollWidth > box.clientWidth + 1)
  .map(box => (box.querySelector("table") || box).className + " " + box.scrollWidth + " px in " + box.clientWidth +
       " (columns: " + [...box.querySelectorAll("th")].map(th => th.textContent.trim().slice(0, 12) + " " +
       Math.round(th.getBoundingClientRect().width)).join(", ") + ")")
"""

# The outermost elements whose right edge passes the screen's: where to look first.
WIDEST_ELEMENT = """
(limit) => {
  const out = [];
  for (const el of document.body.querySelectorAll("*")) {
    const r = el.getBoundingClientRect();
    if (r.right > limit + 1 && !(el.parentElement && el.parentElement.getBoundingClientRect().right > limit + 1)) {
      out.push(el.tagName.toLowerCase() + (el.id ? "#" + el.id : "") +
               (el.className && typeof el.className === "string" ? "." + el.className.trim().split(/\\s+/).join(".") : "") +
               " " + Math.round(r.right) + " px");
    }
  }
  return out.slice(0, 5).join("; ");
}
"""


@pytest.mark.axes
def test_the_locked_out_page_passes_csp_axe_and_fits_a_phone(live_server, browser, recruiter, settings):
    """The page of a login past the failure limit, reached only by a POST, so not in the walk above."""
    settings.AXES_FAILURE_LIMIT = 2
    context = browser.new_context(viewport={"width": PHONE_WIDTH, "height": 900})
    context.add_init_script(RECORD_CSP)
    page = context.new_page()
    try:
        page.goto(live_server.url + "/accounts/login/")
        for _ in range(2):
            page.fill("#id_username", "rita")
            page.fill("#id_password", "wrong")
            page.click("button[type=submit]")
            page.wait_for_load_state("load")
        page.get_by_role("heading", name="Too many failed logins").wait_for()
        assert page.evaluate("window.__csp") == []
        serious = [f"{rule['impact']} {rule['id']}: {rule['help']}" for rule in Axe().run(page, options=AXE_OPTIONS).response["violations"]
                   if rule["impact"] in ("serious", "critical")]
        assert serious == []
        assert page.evaluate("document.documentElement.scrollWidth") <= PHONE_WIDTH
    finally:
        context.close()
