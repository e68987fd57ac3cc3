"""``refusal_code`` on GateReceipt: a refused upload's reason as a code, which the metrics count by. Receipts are
append-only, so those kept before stay without one (the metrics count them as ``unrecorded``)."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('sessions_app', '0015_submission_for_deadline'),
    ]

    operations = [
        migrations.AddField(
            model_name='gatereceipt',
            name='refusal_code',
            field=models.CharField(blank=True, help_text="A refused upload's reason as a code (deadline, too_soon, not_zip...); '' for other receipts, and for uploads refused before it was kept.", max_length=30),
        ),
    ]
