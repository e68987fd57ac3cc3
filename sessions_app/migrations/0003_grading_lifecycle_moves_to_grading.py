"""Attempts and errors now live on grading.GradingRun (grading 0004 copied them there).

``grading_sent_at`` says when the pending grading message was sent, so the
sweep sends no second one while it is pending. Messages sent before this
migration count as sent now.
"""

from django.db import migrations, models
from django.utils import timezone


def pending_messages_sent_now(apps, schema_editor):
    Submission = apps.get_model("sessions_app", "Submission")
    Submission.objects.filter(status="queued").update(grading_sent_at=timezone.now())


class Migration(migrations.Migration):

    dependencies = [
        ("sessions_app", "0002_submission_superseded"),
        ("grading", "0004_gradingrun"),
    ]

    operations = [
        migrations.RemoveField(model_name="submission", name="attempts"),
        migrations.RemoveField(model_name="submission", name="error"),
        migrations.AddField(
            model_name="submission",
            name="grading_sent_at",
            field=models.DateTimeField(blank=True, help_text="When the pending grading message was sent.", null=True),
        ),
        migrations.RunPython(pending_messages_sent_now, migrations.RunPython.noop),
    ]
