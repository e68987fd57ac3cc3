"""``integrity`` keeps what the server's judge said of its own run of a hosted session's tests (canaries,
the witness, JUnit against text against exit code). Receipts from before it have none: grading does not
vouch for their logs by construction."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('sessions_app', '0007_submission_grading_task_id'),
    ]

    operations = [
        migrations.AddField(
            model_name='gatereceipt',
            name='integrity',
            field=models.JSONField(blank=True, default=dict, help_text="A server capture's integrity record: canaries, tampered, unconfirmed."),
        ),
    ]
