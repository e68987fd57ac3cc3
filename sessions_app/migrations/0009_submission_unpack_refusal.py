"""``unpack_refusal``: why an upload cannot be unpacked, found as it arrived; the only verdict its candidate sees.

Uploads stored before it was kept take the worker's refusal, which is the same check on the same bytes."""

from django.db import migrations, models


def from_worker(apps, schema_editor):
    Submission = apps.get_model("sessions_app", "Submission")
    for submission in Submission.objects.filter(status="rejected").only("pk", "reject_reason"):
        Submission.objects.filter(pk=submission.pk).update(
            unpack_refusal=submission.reject_reason or "The archive could not be unpacked.")


class Migration(migrations.Migration):

    dependencies = [
        ('sessions_app', '0008_gatereceipt_integrity'),
    ]

    operations = [
        migrations.AddField(
            model_name='submission',
            name='unpack_refusal',
            field=models.TextField(blank=True, help_text="Why the zip cannot be unpacked, found as it arrived; '' when it can."),
        ),
        migrations.RunPython(from_worker, migrations.RunPython.noop),
    ]
