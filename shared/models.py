"""The workers' heartbeat: the one table every side reads (is a worker alive, which caps it enforces)."""

from django.db import models


class WorkerHeartbeat(models.Model):
    """Written by a periodic task (shared.tasks.record_heartbeat), so pages can say whether a worker is alive."""

    hostname = models.CharField(max_length=200, unique=True)
    seen_at = models.DateTimeField()
    # Which run-wide caps the worker's sandbox enforces (grading/engine/sandbox/cgroups.py).
    caps = models.CharField(max_length=500, blank=True, default="")

    class Meta:
        # why: the table was the recruiter app's; it keeps its name so no data moves.
        db_table = "takehome_workerheartbeat"

    def __str__(self) -> str:
        return f"{self.hostname} at {self.seen_at:%Y-%m-%d %H:%M:%S}"
