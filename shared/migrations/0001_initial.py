"""The workers' heartbeat moves here from the recruiter app (takehome): its table stays as it is.

State only: the table takehome_workerheartbeat exists already (takehome 0001/0002
made it), so nothing is written to the database.
"""

from django.db import migrations, models


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ("takehome", "0002_workerheartbeat_caps"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="WorkerHeartbeat",
                    fields=[
                        ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False,
                                                   verbose_name="ID")),
                        ("hostname", models.CharField(max_length=200, unique=True)),
                        ("seen_at", models.DateTimeField()),
                        ("caps", models.CharField(blank=True, default="", max_length=500)),
                    ],
                    options={"db_table": "takehome_workerheartbeat"},
                ),
            ],
            database_operations=[],
        ),
    ]
