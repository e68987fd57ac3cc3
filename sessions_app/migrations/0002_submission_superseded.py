"""Add the superseded status, and put the review flag on each invitation's latest accepted upload.

Before this, ``is_latest`` sat on the newest upload even when it was refused,
hiding an earlier accepted one from reviewers. No upload is superseded yet,
so nothing needs grading again.
"""

from django.db import migrations, models

REFUSED = ("rejected", "error")


def flag_latest_accepted(apps, schema_editor):
    Submission = apps.get_model("sessions_app", "Submission")
    hidden = Submission.objects.filter(is_latest=True, status__in=REFUSED).values_list("invitation_id", flat=True)
    for invitation_id in list(hidden):
        accepted = (Submission.objects.filter(invitation_id=invitation_id).exclude(status__in=REFUSED)
                    .order_by("-uploaded_at", "-pk").first())
        if accepted is None:
            continue  # every upload was refused: the newest keeps the flag
        Submission.objects.filter(invitation_id=invitation_id, is_latest=True).update(is_latest=False)
        Submission.objects.filter(pk=accepted.pk).update(is_latest=True)


class Migration(migrations.Migration):

    dependencies = [
        ("sessions_app", "0001_initial"),
    ]

    operations = [
        migrations.AlterField(
            model_name="submission",
            name="status",
            field=models.CharField(
                choices=[("received", "Received"), ("queued", "Queued"), ("grading", "Grading"), ("graded", "Graded"),
                         ("rejected", "Rejected"), ("error", "Error"), ("superseded", "Superseded")],
                db_index=True, default="received", max_length=10,
            ),
        ),
        migrations.RunPython(flag_latest_accepted, migrations.RunPython.noop),
    ]
