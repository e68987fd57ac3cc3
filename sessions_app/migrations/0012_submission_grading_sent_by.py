"""``grading_sent_by``: who sent the pending grading message, so the sweep tells a retry (it waits out its
countdown on a worker) from a message sent through the queue. Messages sent before have none and count as
sent through the queue: a retry pending at the upgrade may be sent once more, which grading skips."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('sessions_app', '0011_gatereceipt_submission'),
    ]

    operations = [
        migrations.AddField(
            model_name='submission',
            name='grading_sent_by',
            field=models.CharField(blank=True, choices=[('upload', 'the upload, once stored'), ('retry', 'the worker, to retry after a failure on our side'), ('sweep', 'the sweep (the last message was lost, or the broker did not take it)'), ('worker died', 'the sweep or a restarted worker (the worker grading it died)'), ('reinstated', 'grading of a newer upload (refused or failed: this one is the latest again)'), ('regrade', 'an operator (manage.py regrade, or the admin)')], help_text='Who sent (or tried to send) the pending grading message.', max_length=12),
        ),
    ]
