"""The workers' heartbeat now belongs to the shared app (shared 0001): forget it here, keep its table."""

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ("takehome", "0008_decision_and_audit_event"),
        ("shared", "0001_initial"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[migrations.DeleteModel(name="WorkerHeartbeat")],
            database_operations=[],
        ),
    ]
