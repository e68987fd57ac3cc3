"""The workers' heartbeat moved from the recruiter app to the shared one: its rows stay."""

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone


@pytest.mark.django_db(transaction=True)
def test_the_heartbeat_keeps_its_rows_when_it_moves_to_shared():
    before = [("takehome", "0008_decision_and_audit_event"), ("shared", None)]
    executor = MigrationExecutor(connection)
    executor.migrate(before)
    old = executor.loader.project_state(before[:1]).apps.get_model("takehome", "WorkerHeartbeat")
    old.objects.create(hostname="worker-1", seen_at=timezone.now(), caps="cgroup v2")

    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())

    from shared.models import WorkerHeartbeat

    assert WorkerHeartbeat.objects.get(hostname="worker-1").caps == "cgroup v2"
