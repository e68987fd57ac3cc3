"""The audit trail: who did what, to what, and when.

Every intervention (invite, resend, revoke, extend, decision, role change,
regrade) is written here by the action that performs it, inside the same
transaction, so an intervention that fails leaves no event and one that
succeeds always has one.
"""

from __future__ import annotations

from django.db import models

from .models import AuditEvent, Invitation

ACTIONS = tuple(AuditEvent.Action.values)
# What the server does of itself, with no person or command behind it: named "server", not "command line".
SERVER_ACTIONS = (AuditEvent.Action.WORKSPACE_UNSAVED, AuditEvent.Action.DEADLINE_SUBMIT, AuditEvent.Action.REMINDER)
# Actions the apps above this one add to the trail (``register_actions``), with their labels.
LATER_ACTIONS = AuditEvent.LATER_ACTIONS


def register_actions(labels: dict[str, str]) -> None:
    """Let an app above the recruiter's side write its own actions to the trail, from its AppConfig.ready.

    why not new AuditEvent.Action members: the recruiter's side would then name what the apps above it do,
    and each would be a migration of its table; the column takes any short word, and the label comes from here.
    """
    for value, label in labels.items():
        if len(value) > AuditEvent._meta.get_field("action").max_length:
            raise ValueError(f"Audit action {value!r} is longer than the column.")
        LATER_ACTIONS[value] = label


def record(actor, action: str, target: models.Model, detail: str = "") -> AuditEvent:
    """Append one event to the audit trail and return it.

    actor:  the User who acted, or None for a command run from the shell
            (shown as "command line") or for one of the server's own SERVER_ACTIONS
            (shown as "server").
    action: one of AuditEvent.Action's values: "invite", "resend", "revoke",
            "extend", "decision", "role_change", "regrade", and the server's, actor None:
            "workspace_unsaved" (a closed workspace's files not all saved) and "deadline_submit"
            (a hosted workspace submitted once uploads closed), "reminder" (a candidate who had not
            started emailed a reminder); "reminders_set" (a packet's reminder times), "reviewers_set" (how
            many reviewers each of a packet's submissions gets) and "reassign" (a review given to
            another reviewer, or a reviewer added to a submission). Anything else
            raises ValueError (a typo must not create a new kind of event).
    target: the saved model instance acted on: an Invitation, a Submission
            (its invitation is found), a User (for a role change), or any
            other row. Its type, id and str() are stored, so the event still
            reads correctly if the row is deleted later.
    detail: one plain sentence of what changed, e.g. "reviewer -> recruiter,
            reviewer" or "+30 min, deadline now 2026-12-01 10:00 UTC".

    Call it from inside the action's transaction. Example, from a team page:

        from takehome.audit import record
        record(request.user, "role_change", user, "roles: reviewer -> recruiter")
    """
    if action not in ACTIONS and action not in LATER_ACTIONS:
        known = ", ".join((*ACTIONS, *LATER_ACTIONS))
        raise ValueError(f"Unknown audit action {action!r}; expected one of {known}.")
    invitation = None
    if isinstance(target, Invitation):
        invitation = target
    elif isinstance(getattr(target, "invitation", None), Invitation):
        invitation = target.invitation
    if actor is not None:
        name = actor.get_username()
    else:
        name = "server" if action in SERVER_ACTIONS else "command line"
    return AuditEvent.objects.create(
        actor=actor if actor is not None and actor.pk else None,
        actor_name=name[:150],
        action=action,
        target_type=target._meta.label_lower,
        target_id=str(target.pk or ""),
        target_repr=str(target)[:300],
        invitation=invitation,
        detail=detail,
    )
