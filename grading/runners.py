"""The runner virtualenvs of the packet versions in use: built when a worker starts and by
``manage.py build_runners``, the unused ones removed by ``manage.py prune_runners``.

Which runner a version runs in is chosen from the settings in shared/environments.py.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from django.conf import settings
from django.db.models import Max, Q

from shared.environments import runner_for, runner_key
from takehome.models import PacketVersion

from .engine.pythons import PythonUnavailable
from .engine.requirements import RequirementsRefused
from .engine.runner import RunnerUnavailable, prune_envs


def versions_in_use():
    """Packet versions whose runner must stay: each packet's latest, and any with a live invitation."""
    latest = PacketVersion.objects.values("packet").annotate(n=Max("number")).values_list("packet", "n")
    newest = Q(pk__in=[])
    for packet_id, number in latest:
        newest |= Q(packet_id=packet_id, number=number)
    return PacketVersion.objects.filter(newest | Q(invitations__revoked_at__isnull=True,
                                                   invitations__isnull=False)).distinct()


@dataclasses.dataclass(frozen=True)
class Built:
    """What building the runners of the versions in use did: one line per environment."""

    ready: list[str]
    failed: list[str]


def build_runners() -> Built:
    """Build every runner a version in use needs (each environment once); the failures say why.

    Drafts are left out: a version whose self-check failed is not graded, and its next
    self-check builds what it needs (a packet's broken requirements cost no worker start).
    """
    ready, failed, seen = [], [], set()
    for version in versions_in_use().select_related("packet").order_by("packet__slug", "number"):
        wanted = (version.python_version, version.requirements)
        if wanted in seen or version.state == version.DRAFT:
            continue
        seen.add(wanted)
        spec = version.to_spec()
        try:
            path = runner_for(spec)
        except (RequirementsRefused, PythonUnavailable, RunnerUnavailable) as exc:
            failed.append(f"{version}: {exc}")
        else:
            ready.append(f"{version}: {path}")
    return Built(ready, failed)


def prune_runners() -> list[Path]:
    """Remove the virtualenvs under TAKEHOME_RUNNERS_DIR that no version in use needs (the shared runner stays)."""
    keep = set()
    for version in versions_in_use():
        try:
            key = runner_key(version.to_spec())
        except PythonUnavailable:
            continue  # its Python is gone from this server: nothing of it can be kept
        if key:
            keep.add(key)
    return prune_envs(Path(settings.GRADING_RUNNERS_DIR), keep)
