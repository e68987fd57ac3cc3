"""What came back of each invitation, for the recruiter's board and funnel.

The recruiter's side imports neither the candidate's side nor the desk, so it asks through its signals
(takehome.signals) and this module answers, read here because the desk is the one room that may read
all three: the upload under review and its grading (sessions_app), its reviews (grading), the refused
uploads, red runs and the model window's use (sessions_app). Connected in grading.apps, with the
deletions of these rows, which have every packet's funnel counted again.
"""

from __future__ import annotations

from django.db.models import Count, Min, Sum

from sessions_app.models import UPLOAD_TOO_SOON, GateReceipt, ModelExchange, Submission

from .models import Mark, Review

# The rows of the later rooms the packet's funnel counts (takehome.funnel): a deletion of any has it counted again.
FUNNEL_ROWS = ("sessions_app.Submission", "sessions_app.GateReceipt", "sessions_app.ModelExchange", "grading.Review")


def fill_board_rows(sender, rows: dict, **kwargs) -> None:
    """takehome.signals.board_rows_read: each row's upload under review, its submitted reviews counted, whether
    they disagree, and the refused uploads; four queries.

    Each upload is handed the invitation already read, so whether it came
    late (``Submission.late_minutes``) costs no query.
    """
    latest = {s.pk: s for s in Submission.objects.filter(invitation_id__in=list(rows)).only(
        "pk", "invitation_id", "status", "uploaded_at", "is_latest", "at_deadline", "earlier_submit_at")
        if s.is_latest}
    for s in latest.values():
        s.invitation = rows[s.invitation_id].invitation
        rows[s.invitation_id].submission = s
    reviews = dict(Review.objects.submitted().filter(submission_id__in=list(latest)).values("submission_id")
                   .annotate(n=Count("pk")).values_list("submission_id", "n"))
    # A cell where the submitted marks hold both a pass and a fail is a disagreement.
    split = set(Mark.objects.filter(review__submission_id__in=list(latest), review__submitted_at__isnull=False)
                .values("review__submission_id", "cell").annotate(kinds=Count("passed", distinct=True))
                .filter(kinds__gt=1).values_list("review__submission_id", flat=True))
    for pk, s in latest.items():
        row = rows[s.invitation_id]
        row.reviews = reviews.get(pk, 0)
        row.disagree = pk in split
    # why on the board: an upload refused at the deadline left no Submission; the recruiter hears of it here.
    # why not a too-soon one: the candidate was told to wait and could upload again, so nothing was lost.
    for receipt in (GateReceipt.objects.filter(invitation_id__in=list(rows), step=GateReceipt.Step.UPLOAD,
                                               accepted=False).exclude(refusal__startswith=UPLOAD_TOO_SOON)
                    .order_by("received_at", "pk").only("invitation_id", "refusal")):
        row = rows[receipt.invitation_id]
        row.refused_uploads += 1
        row.last_refusal = receipt.refusal


def funnel_facts(sender, invitations, **kwargs) -> dict[int, dict]:
    """takehome.signals.funnel_facts_read: the first accepted red receipt, whether the upload under review is
    graded and has a submitted review, and the model window's use, of these invitations; four grouped queries."""
    reds = dict(GateReceipt.objects.filter(invitation__in=invitations, step=GateReceipt.Step.RED, accepted=True)
                .values("invitation_id").annotate(at=Min("received_at")).values_list("invitation_id", "at"))
    latest = Submission.objects.latest_per_invitation().filter(invitation__in=invitations)
    graded = set(latest.filter(status=Submission.Status.GRADED).values_list("invitation_id", flat=True))
    reviewed = set(Review.objects.submitted().filter(submission__in=latest)
                   .values_list("submission__invitation_id", flat=True))
    model = {row["invitation_id"]: row for row in ModelExchange.objects.filter(invitation__in=invitations)
             .values("invitation_id").annotate(requests=Count("pk"), tokens_in=Sum("tokens_in", default=0),
                                               tokens_out=Sum("tokens_out", default=0))}
    facts: dict[int, dict] = {}
    for pk in {*reds, *graded, *reviewed, *model}:
        used = model.get(pk, {})
        facts[pk] = {"first_red_at": reds.get(pk), "graded": pk in graded, "reviewed": pk in reviewed,
                     "model_requests": used.get("requests", 0), "model_tokens_in": used.get("tokens_in", 0),
                     "model_tokens_out": used.get("tokens_out", 0)}
    return facts
