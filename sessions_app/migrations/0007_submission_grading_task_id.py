"""``grading_task_id`` names the pending grading message, so the sweep can ask the broker whether it is
still there. A message sent before this migration has none: the sweep judges it by its age, as before."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('sessions_app', '0006_workspace_host'),
    ]

    operations = [
        migrations.AddField(
            model_name='submission',
            name='grading_task_id',
            field=models.CharField(blank=True, help_text='The id of the last grading message sent (or tried) while it waits.', max_length=64),
        ),
    ]
