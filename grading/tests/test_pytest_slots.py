"""Test processes side by side each hold a slot of their own, and a slot keeps their uids, ports, folders and
Redis database apart (shared/pytest_slots.py)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from shared import pytest_slots

ROOT = Path(__file__).resolve().parents[2]
# why a lock folder of the test's own: the machine's slots are claimed and freed meanwhile by the other test
# processes on the machine (a second suite beside this one), so which one is free first there is not known.
CLAIM = ("import sys; from pathlib import Path; from shared import pytest_slots; "
         "pytest_slots._lock_dir = lambda: Path(sys.argv[1]); print(pytest_slots.claim(), flush=True); input()")


def test_processes_running_at_once_claim_different_slots_and_a_slot_is_freed_when_its_process_ends(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "TAKEHOME_TEST_SLOT"}
    claim = [sys.executable, "-c", CLAIM, str(tmp_path)]
    holders = [subprocess.Popen(claim, cwd=ROOT, env=env, text=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
               for _ in range(3)]
    try:
        slots = [int(h.stdout.readline()) for h in holders]
        assert sorted(slots) == [0, 1, 2]
        first = holders[slots.index(0)]
        first.communicate("\n", timeout=120)
        again = subprocess.run(claim, cwd=ROOT, env=env, input="\n", capture_output=True, text=True, timeout=30)
        assert again.stdout == "0\n", again.stderr  # the first free one: the ended process let its slot go
    finally:
        for h in holders:
            if h.returncode is None:
                h.communicate("\n", timeout=120)


def test_this_process_holds_the_slot_its_environment_names():
    folder = pytest_slots._lock_dir()
    ours = folder / f"slot-{os.environ['TAKEHOME_TEST_SLOT']}.lock"
    busy = subprocess.run([sys.executable, "-c", "import fcntl, sys; f = open(sys.argv[1]); "
                           "fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)", str(ours)], capture_output=True, text=True)
    assert "BlockingIOError" in busy.stderr  # held: no other test process on the machine can claim it


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


@pytest.mark.parametrize("turn", ["first", "second"])
def test_each_test_stores_its_files_in_an_empty_folder_of_its_own_which_what_it_starts_gets_too(turn, settings):
    """Stored files are named by database ids, which the test database hands out again from test to test:
    a recording one test left (recordings/inv-1.cast) must not be found by the next one, in this run or a
    later one."""
    from shared import stored

    root = Path(settings.MEDIA_ROOT)
    assert not stored.exists(stored.recording_name(1)), f"a recording another test left is in {root}"
    assert list(root.iterdir()) == []
    assert os.environ["TAKEHOME_MEDIA_ROOT"] == str(root)
    stored.save(stored.recording_name(1), b'{"version": 2, "width": 80, "height": 24}\n')
    assert (root / stored.recording_name(1)).exists()
    started = subprocess.run([sys.executable, "-c", "import os; print(os.environ['TAKEHOME_MEDIA_ROOT'])"],
                             capture_output=True, text=True, check=True)
    assert started.stdout.strip() == str(root)
