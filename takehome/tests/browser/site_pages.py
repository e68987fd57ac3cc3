"""Every page of the site, for the browser tests that walk them all (test_every_page.py).

One list, so a new page is checked by adding one line here: its name, who
looks at it and the path, built from the `Site` the walk sets up (a packet,
candidates at each stage, a scored submission). `role` is the person the
browser is logged in as: "recruiter", "reviewer", "norole" (an account in
neither group), "staff" (a superuser), or None for anyone (a candidate's link
needs no log-in).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


def busy() -> Exception:
    from takehome.unavailable import BUSY, Unavailable

    return Unavailable(BUSY)


def too_many() -> Exception:
    from sessions_app.links import TooManyLookups

    return TooManyLookups(retry_after=30)


@dataclass
class Site:
    """What the walk sets up, for the paths below to name."""

    slug: str
    fresh_token: str  # an invitation nobody opened yet
    started_token: str  # a candidate whose clock runs
    grace_token: str  # a candidate past the deadline, within the grace period
    closed_token: str  # a candidate whose time is over
    submitted_token: str  # a candidate with a graded upload
    submission_id: int  # that upload
    scored_id: int  # an upload whose review the reviewer already submitted
    recruiter_id: int  # the recruiter's account
    packages_slug: str  # a packet with requirements, a src/ layout and tests/ (business-days)
    packages_token: str  # a candidate of it whose clock runs
    chat_token: str  # a candidate of a packet whose model the server provides, past red, one exchange on record
    chat_review_id: int  # that candidate's graded upload, its evidence carrying the exchange
    replay_review_id: int  # an upload from a hosted session whose recording the review page plays
    draft_slug: str  # a packet whose self-check failed (a draft, with the checks' logs)
    set_password_path: str  # a set-password link that still works (the team's invitation)
    person_id: int  # a candidate whose upload was scored (the search lists them, their page shows it)


@dataclass(frozen=True)
class SitePage:
    name: str
    role: str | None
    path: Callable[[Site], str]
    status: int = 200
    # A function that raises while the page renders (dotted name, and what it raises), for the
    # pages only trouble shows: the 503 of an outage, the 429 of too many link look-ups.
    raises: tuple[str, Callable[[], Exception]] | None = None
    # axe-core's findings count; off only for Django's own admin, whose markup is Django's
    # (its date widgets lack labels, for one). The policy and the phone width still hold there.
    axe: bool = True
    # What the page's scripts draw after it has loaded, to wait for before checking (CSS selectors, each
    # waited for): the page is checked as it stands once they have.
    ready: tuple[str, ...] = ()


# A live workspace once its terminal and its editor have each had the server's first answer and said it in
# their status lines (the walk has no sandbox: the terminal says it reconnects, the editor that it was refused).
WORKSPACE_ANSWERED = ("#terminal-status[data-state]", "#editor-status[data-state]")

PAGES = [
    # Anyone
    SitePage("login", None, lambda s: "/accounts/login/"),
    SitePage("404", None, lambda s: "/no-such-page/", 404),
    SitePage("403 no role", "norole", lambda s: "/", 403),
    SitePage("403 wrong role", "reviewer", lambda s: "/packets/", 403),
    SitePage("503", "recruiter", lambda s: "/packets/", 503, raises=("takehome.views.worker_status", busy)),
    # Recruiter
    SitePage("packet list", "recruiter", lambda s: "/packets/"),
    SitePage("packet create", "recruiter", lambda s: "/packets/new/"),
    SitePage("packet detail", "recruiter", lambda s: f"/packets/{s.slug}/"),
    SitePage("packet edit", "recruiter", lambda s: f"/packets/{s.slug}/edit/"),
    SitePage("packet detail, with requirements", "recruiter", lambda s: f"/packets/{s.packages_slug}/"),
    SitePage("packet invite", "recruiter", lambda s: f"/packets/{s.slug}/invite/"),
    SitePage("packet invite, a draft: no Invite button", "recruiter", lambda s: f"/packets/{s.draft_slug}/invite/"),
    SitePage("invitation board", "recruiter", lambda s: f"/packets/{s.slug}/invitations/"),
    SitePage("packet detail, a draft whose self-check failed", "recruiter", lambda s: f"/packets/{s.draft_slug}/"),
    SitePage("packet import", "recruiter", lambda s: "/packets/import/"),
    SitePage("candidates", "recruiter", lambda s: "/candidates/"),
    SitePage("candidates, a search", "recruiter", lambda s: "/candidates/?q=grace"),
    SitePage("a candidate's page", "recruiter", lambda s: f"/candidates/{s.person_id}/"),
    SitePage("account (API tokens)", "recruiter", lambda s: "/account/"),
    SitePage("queue, read by a recruiter", "recruiter", lambda s: "/review/?show=all"),
    SitePage("review page, read by a recruiter", "recruiter", lambda s: f"/review/{s.scored_id}/"),
    SitePage("debrief, read by a recruiter", "recruiter", lambda s: f"/review/debrief/{s.slug}/"),
    SitePage("debrief index, read by a recruiter", "recruiter", lambda s: "/review/debrief/"),
    # Reviewer
    SitePage("review queue", "reviewer", lambda s: "/review/"),
    SitePage("review queue all", "reviewer", lambda s: "/review/?show=all"),
    SitePage("review page", "reviewer", lambda s: f"/review/{s.submission_id}/"),
    SitePage("review page submitted", "reviewer", lambda s: f"/review/{s.scored_id}/"),
    SitePage("debrief", "reviewer", lambda s: f"/review/debrief/{s.slug}/"),
    SitePage("debrief index", "reviewer", lambda s: "/review/debrief/"),
    SitePage("review page with the model window's exchanges", "reviewer", lambda s: f"/review/{s.chat_review_id}/"),
    SitePage("review page with a hosted session's recording", "reviewer", lambda s: f"/review/{s.replay_review_id}/",
             ready=("#replay-player .ap-player .ap-term",)),
    # Candidate
    SitePage("candidate landing", None, lambda s: f"/t/{s.fresh_token}/"),
    SitePage("candidate start confirmation", None, lambda s: f"/t/{s.fresh_token}/start"),
    SitePage("candidate session", None, lambda s: f"/t/{s.started_token}/"),
    SitePage("candidate session, with requirements", None, lambda s: f"/t/{s.packages_token}/"),
    SitePage("candidate workspace (hosted terminal)", None, lambda s: f"/t/{s.started_token}/workspace",
             ready=WORKSPACE_ANSWERED),
    SitePage("candidate session, the model window open", None, lambda s: f"/t/{s.chat_token}/"),
    SitePage("candidate workspace, the chat with the model open", None, lambda s: f"/t/{s.chat_token}/workspace",
             ready=WORKSPACE_ANSWERED),
    SitePage("candidate grace period", None, lambda s: f"/t/{s.grace_token}/"),
    SitePage("candidate time over", None, lambda s: f"/t/{s.closed_token}/"),
    SitePage("candidate workspace after the deadline (files read-only)", None,
             lambda s: f"/t/{s.closed_token}/workspace"),
    SitePage("candidate workspace file, read-only", None,
             lambda s: f"/t/{s.closed_token}/workspace/read-only?path=invoices.py"),
    SitePage("candidate too many look-ups", None, lambda s: "/t/not-a-real-token/", 429,
             raises=("sessions_app.views.invitation_for", too_many)),
    SitePage("candidate submitted", None, lambda s: f"/t/{s.submitted_token}/"),
    SitePage("candidate upload", None, lambda s: f"/t/{s.submitted_token}/uploads/{s.submission_id}"),
    SitePage("candidate bad link", None, lambda s: "/t/not-a-real-token/", 404),
    # Staff: the team, and a set-password link (one that no longer works: the page says so)
    SitePage("team", "staff", lambda s: "/team/"),
    SitePage("webhooks", "staff", lambda s: "/webhooks/"),
    SitePage("set password, used link", None, lambda s: "/accounts/set-password/MQ/used-token/"),
    SitePage("set password, a working link", None, lambda s: s.set_password_path),
    SitePage("set password, done", None, lambda s: "/accounts/set-password/done/"),
    # Staff: Django's admin
    SitePage("admin index", "staff", lambda s: "/admin/", axe=False),
    SitePage("admin users", "staff", lambda s: "/admin/auth/user/", axe=False),
    SitePage("admin user", "staff", lambda s: f"/admin/auth/user/{s.recruiter_id}/change/", axe=False),
    SitePage("admin invitations", "staff", lambda s: "/admin/takehome/invitation/", axe=False),
]
