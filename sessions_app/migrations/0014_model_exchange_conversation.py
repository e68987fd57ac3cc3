"""``conversation`` and ``artifact`` on ModelExchange: exchanges are kept as conversations, and the server
says where it wrote a reply in a hosted workspace. Exchanges made before were each sent on their own; they
count as conversation 1, with nothing written."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('sessions_app', '0013_submission_at_deadline'),
    ]

    operations = [
        migrations.AddField(
            model_name='modelexchange',
            name='conversation',
            field=models.PositiveIntegerField(default=1, help_text="The invitation's conversation, from 1."),
        ),
        migrations.AddField(
            model_name='modelexchange',
            name='artifact',
            field=models.CharField(blank=True, help_text='Where the server wrote the reply in a hosted workspace.', max_length=100),
        ),
    ]
