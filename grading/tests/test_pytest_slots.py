"""Test processes side by side each hold a slot of their own, and a slot keeps their uids, ports, folders and
Redis database apart (shared/pytest_slots.py)."""

import os
import subprocess
import sys
from pathlib import Path

from shared import pytest_slots

ROOT = Path(__file__).resolve().parents[2]
CLAIM = "from shared import pytest_slots; print(pytest_slots.claim(), flush=True); input()"


def test_processes_running_at_once_claim_different_slots_and_a_slot_is_freed_when_its_process_ends():
    env = {k: v for k, v in os.environ.items() if k != "TAKEHOME_TEST_SLOT"}
    holders = [subprocess.Popen([sys.executable, "-c", CLAIM], cwd=ROOT, env=env, text=True,
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE) for _ in range(3)]
    try:
        slots = [int(h.stdout.readline()) for h in holders]
    finally:
        for h in holders:
            h.communicate("\n", timeout=120)
    assert len(set(slots)) == 3 and int(os.environ["TAKEHOME_TEST_SLOT"]) not in slots
    again = subprocess.run([sys.executable, "-c", CLAIM], cwd=ROOT, env=env, input="\n", capture_output=True,
                           text=True, timeout=30)
    assert int(again.stdout) in slots  # the first free one: the ended processes let theirs go


def test_two_slots_share_no_uid_port_folder_or_redis_database(monkeypatch):
    monkeypatch.setenv("CELERY_BROKER_URL", "redis://127.0.0.1:6379/0")
    one, two = (pytest_slots.environment(n, Path("/v")) for n in (0, 1))
    uids = [range(int(e["TAKEHOME_SANDBOX_UID_BASE"]), int(e["TAKEHOME_SANDBOX_UID_BASE"])
                  + pytest_slots.UIDS_PER_SLOT) for e in (one, two)]
    assert not set(uids[0]) & set(uids[1])
    assert min(uids[0]) >= pytest_slots.UID_BAND > 63000 + 500  # above the settings' defaults
    assert one["TAKEHOME_SCRATCH_DIR"] != two["TAKEHOME_SCRATCH_DIR"]
    assert one["TAKEHOME_WORKSPACES_DIR"] != two["TAKEHOME_WORKSPACES_DIR"]
    assert one["TAKEHOME_MEDIA_ROOT"] != two["TAKEHOME_MEDIA_ROOT"]
    assert (one["CELERY_BROKER_URL"], two["CELERY_BROKER_URL"]) == ("redis://127.0.0.1:6379/0",
                                                                    "redis://127.0.0.1:6379/1")
    assert pytest_slots.ports().stop <= 32768  # below the kernel's ephemeral ports


def test_each_test_pool_has_uids_no_other_pool_or_the_slots_settings_use():
    from django.conf import settings

    base = int(os.environ["TAKEHOME_SANDBOX_UID_BASE"])
    taken = set(range(base, base + settings.GRADING_SANDBOX_SLOTS))
    workspaces = int(os.environ["TAKEHOME_WORKSPACE_UID_BASE"])
    taken |= set(range(workspaces, workspaces + settings.WORKSPACE_SLOTS))
    for pool in pytest_slots.TEST_POOLS:
        uids = set(range(pytest_slots.uids(pool), pytest_slots.uids(pool) + pytest_slots.TEST_POOL_SIZE))
        assert not uids & taken, pool
        assert max(uids) < base + pytest_slots.UIDS_PER_SLOT, pool  # inside this slot's band
        taken |= uids


ENTER = ("import os; from pathlib import Path; from shared import pytest_slots; pytest_slots.enter(Path('var')); "
         "print(os.environ['TAKEHOME_TEST_SLOT'], os.environ['TAKEHOME_SANDBOX_UID_BASE'])")


def entered(**env) -> list[str]:
    done = subprocess.run([sys.executable, "-c", ENTER], cwd=ROOT, env={**os.environ, **env}, capture_output=True,
                          text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def test_an_xdist_worker_takes_a_slot_of_its_own_and_what_a_test_starts_keeps_its_tests():
    mine = os.environ["TAKEHOME_TEST_SLOT"]
    here = os.environ.get("PYTEST_XDIST_WORKER", "")
    # a server or worker this test starts: the same slot, the same uids
    assert entered() == [mine, os.environ["TAKEHOME_SANDBOX_UID_BASE"]]
    # a pytest-xdist worker started by this process (which inherits its environment): another slot
    slot, uids = entered(PYTEST_XDIST_WORKER=here + "-child")
    assert slot != mine and uids != os.environ["TAKEHOME_SANDBOX_UID_BASE"]


SERVER_TEST_DATABASE = ("import pytest, django; from django.conf import settings; django.setup(); "
                        "print(settings.DATABASES['default']['TEST']['NAME'])")


def test_a_database_servers_test_database_is_named_for_the_slot():
    """Two suites against one PostgreSQL never share a test database: pytest-django's names (test_<name>_gw<N>)
    are the same in both, so the slot goes into the name."""
    names = {}
    for worker in ("", "-other"):
        env = {**os.environ, "DATABASE_URL": "postgres://someone@127.0.0.1:5432/shop", "DEBUG": "true",
               "PYTEST_XDIST_WORKER": os.environ.get("PYTEST_XDIST_WORKER", "") + worker}
        done = subprocess.run([sys.executable, "-c", SERVER_TEST_DATABASE], cwd=ROOT, env=env, capture_output=True,
                              text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        names[worker] = done.stdout.strip()
    assert names[""] == f"test_shop_slot{os.environ['TAKEHOME_TEST_SLOT']}"
    assert names["-other"].startswith("test_shop_slot") and names["-other"] != names[""]
