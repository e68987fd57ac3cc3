"""Readiness asks this host's serve_workspaces, on its status socket, wherever a packet offers a hosted workspace."""

from __future__ import annotations

import asyncio
import shutil
import socket
import tempfile
from pathlib import Path

import pytest

from conftest import HANG_GUARD_S, _wait_for
from sessions_app.hosted import gate_host
from sessions_app.tests.helpers import gate_host_in_a_thread
from takehome.models import PacketVersion


@pytest.fixture
def ws_dir(settings):
    # why /tmp and a short name: a unix socket's path must stay under 108 bytes
    folder = Path(tempfile.mkdtemp(prefix="th-ready-"))
    settings.WORKSPACES_DIR = folder
    settings.HEALTH_WORKSPACES = "auto"
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def serving(transactional_db, ws_dir):
    """serve_workspaces' GateHost on its own event loop in a thread; ``stop()`` ends it and waits."""
    with gate_host_in_a_thread() as host:
        _wait_for(gate_host.status_socket_path().exists, HANG_GUARD_S, "serve_workspaces' status socket",
                  interval=0.02)
        yield host


def hosted_offered(sample_packet) -> None:
    version = sample_packet.latest_version()
    assert version.work_mode in (PacketVersion.WorkMode.HOSTED, PacketVersion.WorkMode.BOTH)


@pytest.mark.django_db
def test_off_while_no_packet_offers_a_hosted_workspace(ws_dir):
    check = gate_host.readiness(database_up=True)
    assert (check.name, check.state) == ("workspaces", "off")


def test_ok_while_serve_workspaces_answers_and_failing_once_it_stops(serving, sample_packet, ws_dir):
    hosted_offered(sample_packet)
    check = gate_host.readiness(database_up=True)
    assert check.state == "ok", check.reason
    assert "serving 0 open workspaces" in check.reason

    serving.stop()
    assert not gate_host.status_socket_path().exists()  # it takes its socket with it
    check = gate_host.readiness(database_up=True)
    assert check.state == "fail" and "not running" in check.reason
    assert str(ws_dir) not in check.reason


@pytest.mark.django_db
def test_a_socket_left_by_a_killed_host_counts_as_not_running(sample_packet, ws_dir):
    left = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    left.bind(str(gate_host.status_socket_path()))
    left.close()  # the file stays; nothing listens
    check = gate_host.readiness(database_up=True)
    assert check.state == "fail" and "not running" in check.reason


@pytest.mark.django_db
def test_a_host_that_accepts_and_never_answers_fails_within_the_timeout(sample_packet, ws_dir, settings):
    settings.HEALTH_TIMEOUT_S = 0.3
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as stuck:
        stuck.bind(str(gate_host.status_socket_path()))
        stuck.listen()  # the kernel accepts; nobody writes
        # why no clock: nobody answers, so an answer at all means the check gave up; its reason says when
        check = gate_host.readiness(database_up=True)
    assert check.state == "fail" and "did not answer within 0.3 s" in check.reason


def test_the_setting_turns_it_on_or_off_whatever_the_packets(ws_dir, settings):
    # No database: neither answer reads it.
    settings.HEALTH_WORKSPACES = "no"
    assert gate_host.readiness(database_up=True).state == "off"
    settings.HEALTH_WORKSPACES = "yes"
    check = gate_host.readiness(database_up=False)
    assert check.state == "fail" and "not running" in check.reason
    settings.HEALTH_WORKSPACES = "auto"
    assert gate_host.readiness(database_up=False).state == "unknown"


@pytest.mark.django_db
def test_readyz_is_not_ready_while_a_hosted_packet_has_no_workspace_host(client, sample_packet, ws_dir):
    response = client.get("/readyz")
    assert response.status_code == 503
    workspaces = response.json()["checks"]["workspaces"]
    assert workspaces["state"] == "fail" and str(ws_dir) not in response.content.decode()


def test_a_workspaces_folder_too_deep_for_a_socket_is_named_and_the_gate_is_served_all_the_same(ws_dir, settings,
                                                                                                  caplog):
    settings.HEALTH_WORKSPACES = "yes"
    settings.WORKSPACES_DIR = ws_dir / ("deep-" * 20)
    host = gate_host.GateHost()
    assert asyncio.run(host.serve_status()) is None  # logged; serve_workspaces goes on
    assert "cannot answer readiness probes" in caplog.text
    check = gate_host.readiness(database_up=True)
    assert check.state == "fail" and "choose a shorter TAKEHOME_WORKSPACES_DIR" in check.reason
