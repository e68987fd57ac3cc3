"""One row per grading attempt (GradingRun), owned by grading.

Submission.attempts and Submission.error move here (sessions_app 0003 drops
them): each counted attempt becomes a run, and the last one carries the
submission's error, if any. A submission left in ``grading`` gets a running
run whose heartbeat is its last change of status, so the sweep finds it lost
and sends it again if no worker is on it.
"""

import django.db.models.deletion
import django.utils.timezone
from django.db import migrations, models

FINAL = {"graded": "graded", "rejected": "rejected", "error": "error"}
UNKNOWN = "recorded before grading attempts were kept one by one: only that it happened is known"


def carry_attempts_and_errors(apps, schema_editor):
    Submission = apps.get_model("sessions_app", "Submission")
    GradingRun = apps.get_model("grading", "GradingRun")
    rows = Submission.objects.exclude(attempts=0, error="").values_list(
        "pk", "status", "status_changed_at", "attempts", "error")
    for pk, status, changed_at, attempts, error in rows.iterator():
        count = max(attempts, 1)
        for attempt in range(1, count + 1):
            last = attempt == count
            outcome = "lost" if not last else FINAL.get(status, "running" if status == "grading" else "retried")
            GradingRun.objects.create(
                submission_id=pk, attempt=attempt, started_at=changed_at, heartbeat_at=changed_at,
                finished_at=None if outcome == "running" else changed_at, outcome=outcome,
                error=error if last else UNKNOWN,
            )


def carry_back(apps, schema_editor):
    Submission = apps.get_model("sessions_app", "Submission")
    GradingRun = apps.get_model("grading", "GradingRun")
    for pk in GradingRun.objects.values_list("submission_id", flat=True).distinct():
        runs = GradingRun.objects.filter(submission_id=pk).order_by("-attempt")
        last = runs.first()
        Submission.objects.filter(pk=pk).update(
            attempts=runs.count(), error=last.error if last.outcome == "error" else "")


class Migration(migrations.Migration):

    dependencies = [
        ("grading", "0003_evidence_tampered"),
        ("sessions_app", "0002_submission_superseded"),
    ]

    operations = [
        migrations.CreateModel(
            name="GradingRun",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("attempt", models.PositiveIntegerField()),
                ("task_id", models.CharField(blank=True, max_length=64)),
                ("worker", models.CharField(blank=True, help_text="The Celery worker's hostname.", max_length=200)),
                ("pid", models.PositiveIntegerField(blank=True, null=True)),
                ("started_at", models.DateTimeField(default=django.utils.timezone.now)),
                ("heartbeat_at", models.DateTimeField(default=django.utils.timezone.now)),
                ("finished_at", models.DateTimeField(blank=True, null=True)),
                ("outcome", models.CharField(
                    choices=[("running", "Running"), ("graded", "Graded"), ("rejected", "Rejected"),
                             ("error", "Error"), ("retried", "Retried"), ("lost", "Lost")],
                    default="running", max_length=10)),
                ("error", models.TextField(blank=True, help_text="For operators only; never shown to candidates.")),
                ("submission", models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name="runs",
                                                 to="sessions_app.submission")),
            ],
            options={
                "ordering": ["submission", "attempt"],
                "indexes": [models.Index(fields=["outcome", "heartbeat_at"], name="gradingrun_outcome_heartbeat")],
                "constraints": [models.UniqueConstraint(fields=("submission", "attempt"),
                                                        name="gradingrun_one_per_attempt")],
            },
        ),
        migrations.RunPython(carry_attempts_and_errors, carry_back),
    ]
