"""Which failures are outages (503 with Retry-After) and which are bugs (500), from real driver errors."""

from __future__ import annotations

import errno
import sqlite3
from types import SimpleNamespace

import psycopg
import pytest
from django.db import IntegrityError, OperationalError
from django.db.utils import DatabaseErrorWrapper
from django.test import RequestFactory

from takehome.unavailable import BUSY, DOWN, NO_SPACE, classify, server_error


def sqlite_error(tmp_path, make) -> BaseException:
    """A real sqlite3 error, wrapped by Django's own wrapper (whatever database the tests run on)."""
    path = str(tmp_path / "db.sqlite3")
    holder = sqlite3.connect(path, isolation_level=None, timeout=0)
    holder.execute("CREATE TABLE t (x)")
    other = sqlite3.connect(path, isolation_level=None, timeout=0)
    try:
        with DatabaseErrorWrapper(SimpleNamespace(Database=sqlite3, errors_occurred=False)):
            make(holder, other)
    except Exception as exc:  # noqa: BLE001 - the error is what is tested
        return exc
    finally:
        holder.close()
        other.close()
    raise AssertionError("no error")


def busy(holder, other):
    holder.execute("BEGIN IMMEDIATE")
    other.execute("BEGIN IMMEDIATE")


def read_only(holder, other):
    other.execute("PRAGMA query_only=1")
    other.execute("INSERT INTO t VALUES (1)")


def constraint(holder, other):
    holder.execute("CREATE TABLE u (x UNIQUE)")
    holder.execute("INSERT INTO u VALUES (1)")
    holder.execute("INSERT INTO u VALUES (1)")


@pytest.mark.parametrize("make,kind", [(busy, BUSY), (read_only, DOWN), (constraint, None)])
def test_sqlite_errors(tmp_path, make, kind):
    outage = classify(sqlite_error(tmp_path, make))
    assert (outage.kind if outage else None) == kind


@pytest.mark.parametrize("sqlstate,kind", [
    ("55P03", BUSY),  # lock_not_available: lock_timeout passed
    ("40001", BUSY),  # serialization_failure
    ("40P01", BUSY),  # deadlock_detected
    ("57014", BUSY),  # query_canceled
    ("53100", NO_SPACE),  # disk_full
    ("25006", DOWN),  # read_only_sql_transaction
    ("57P01", DOWN),  # admin_shutdown
    ("08006", DOWN),  # connection_failure
    ("23505", None),  # unique_violation: a bug, not an outage
    ("42P01", None),  # undefined_table
])
def test_postgresql_errors(sqlstate, kind):
    exc = OperationalError("wrapped")
    exc.__cause__ = psycopg.errors.lookup(sqlstate)("from the server")
    outage = classify(exc)
    assert (outage.kind if outage else None) == kind


def test_a_postgresql_connection_that_never_answered_is_down():
    exc = OperationalError("connection failed: Connection refused")
    exc.__cause__ = psycopg.OperationalError("connection failed: Connection refused")
    assert classify(exc).kind == DOWN


@pytest.mark.parametrize("exc,kind", [
    (OSError(errno.ENOSPC, "No space left on device"), NO_SPACE),
    (OSError(errno.EDQUOT, "Disk quota exceeded"), NO_SPACE),
    (OSError(errno.EACCES, "Permission denied"), None),
    (IntegrityError("UNIQUE constraint failed"), None),
    (ValueError("a bug"), None),
])
def test_other_errors(exc, kind):
    outage = classify(exc)
    assert (outage.kind if outage else None) == kind


def test_an_outage_met_outside_a_view_is_a_503_and_a_bug_is_still_a_500(tmp_path, settings):
    settings.RETRY_AFTER_BUSY_S = 4
    request = RequestFactory().post("/review/1/marks/red", HTTP_ACCEPT="application/json")
    try:
        raise sqlite_error(tmp_path, busy)
    except OperationalError:
        response = server_error(request)
    assert response.status_code == 503 and response["Retry-After"] == "4"
    try:
        raise ValueError("a bug")
    except ValueError:
        response = server_error(RequestFactory().get("/"))
    assert response.status_code == 500
