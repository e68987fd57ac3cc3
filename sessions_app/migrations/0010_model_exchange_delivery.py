"""A model exchange is reserved before the upstream call (``finished`` False until it ends), and says what
was sent besides the messages (``options``) and whether the client left before the reply ended. Exchanges
from before were written whole after their reply: they are finished, with no options on record."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('sessions_app', '0009_submission_unpack_refusal'),
    ]

    operations = [
        migrations.AddField(
            model_name='modelexchange',
            name='options',
            field=models.JSONField(blank=True, default=dict, help_text="The request's keys sent besides the messages."),
        ),
        migrations.AddField(
            model_name='modelexchange',
            name='client_gone',
            field=models.BooleanField(default=False, help_text='The client left before the reply ended.'),
        ),
        migrations.AddField(
            model_name='modelexchange',
            name='finished',
            field=models.BooleanField(default=True, help_text='False while the upstream call is under way.'),
        ),
    ]
