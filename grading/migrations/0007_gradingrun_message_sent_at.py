"""``message_sent_at``: when the message a run started from was sent, from which the sweep reads how far the
broker's queue has moved. Runs from before have none: until runs started after this migration say so, the
sweep takes a waiting message as lost only once no grading has run for TAKEHOME_STALE_QUEUED_S."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('grading', '0006_review_draft_notes'),
    ]

    operations = [
        migrations.AddField(
            model_name='gradingrun',
            name='message_sent_at',
            field=models.DateTimeField(blank=True, db_index=True, help_text='When the message this run started from was sent through the queue; blank for a retry or a copy sent before the last one.', null=True),
        ),
    ]
