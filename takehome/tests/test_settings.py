"""The settings refuse to run in production mode with the development key, and stop on a value they cannot use.

Each error is one line naming the variable and saying what to write, never a traceback to read past.
"""

import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def manage(*args, drop_env=(), **env):
    drop = {"DEBUG", "SECRET_KEY", "SECRET_KEY_FILE", "DJANGO_ALLOW_ASYNC_UNSAFE", *drop_env}  # the browser tests set the async flag
    base = {k: v for k, v in os.environ.items() if k not in drop}
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env={**base, **env},
        capture_output=True, text=True, timeout=600,  # a guard against a hang, not a measurement
    )


def test_production_refuses_the_development_key():
    from takehome.settings import DEV_SECRET_KEY

    result = manage("check", DEBUG="false", SECRET_KEY=DEV_SECRET_KEY)
    assert result.returncode != 0
    assert "Refusing to start in production mode" in result.stderr


def test_production_refuses_a_missing_key():
    result = manage("check", DEBUG="false")
    assert result.returncode != 0
    assert "SECRET_KEY is not set" in result.stderr


def test_debug_may_use_the_development_key():
    assert manage("check", DEBUG="true").returncode == 0


def test_secret_key_may_come_from_a_file(tmp_path):
    key = tmp_path / "key"
    key.write_text("k" * 60 + "\n")
    result = manage("shell", "-c", "from django.conf import settings; print(len(settings.SECRET_KEY))",
                    DEBUG="false", SECRET_KEY_FILE=str(key), ALLOWED_HOSTS="takehome.example.com")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "60"


def test_check_deploy_is_clean_in_production():
    result = manage(
        "check", "--deploy", "--fail-level", "WARNING",
        DEBUG="false", SECRET_KEY=secrets.token_urlsafe(50), ALLOWED_HOSTS="takehome.example.com",
        SITE_URL="https://takehome.example.com",
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("value", ["maybe", "2", "ture"])
def test_a_bad_boolean_stops_the_process(value):
    result = manage("check", DEBUG=value, SECRET_KEY=secrets.token_urlsafe(50))
    assert f"DEBUG={value} is not a boolean: write true or false." in stopped_with(result)


@pytest.mark.parametrize("name, value", [
    ("TAKEHOME_DB_BUSY_TIMEOUT_S", "0"),
    ("TAKEHOME_SANDBOX_CAPS", "cgroup3"),
    ("TAKEHOME_SANDBOX_TMPFS", "none"),
    ("TAKEHOME_SANDBOX_FALLBACK_PROCESSES", "2"),
    ("TAKEHOME_SANDBOX_MEMORY_MB", "0"),
])
def test_a_bad_sandbox_cap_setting_stops_the_process(name, value):
    result = manage("check", DEBUG="true", **{name: value})
    assert result.returncode != 0
    assert name in result.stderr


def test_celery_is_configured_for_late_acks_and_json(settings):
    assert settings.CELERY_TASK_ACKS_LATE is True
    assert settings.CELERY_WORKER_PREFETCH_MULTIPLIER == 1
    assert settings.CELERY_TASK_SERIALIZER == "json"
    assert settings.CELERY_ACCEPT_CONTENT == ["json"]
    hard_limit = settings.GRADING_TIME_LIMIT_S + 60
    assert settings.CELERY_BROKER_TRANSPORT_OPTIONS["visibility_timeout"] > hard_limit


def test_a_new_var_folder_is_created_so_sqlite_can_start(tmp_path):
    var = tmp_path / "fresh" / "var"
    # why --plan: it opens the database (SQLite creates the file) and applies nothing; make run's first start
    # migrating a new var/ is test_make_run's and test_readme_commands'
    result = manage("migrate", "--plan", "-v0", drop_env=("DATABASE_URL",), DEBUG="true", TAKEHOME_VAR_DIR=str(var))
    assert result.returncode == 0, result.stderr
    assert (var / "db.sqlite3").exists()


@pytest.mark.django_db
def test_the_database_waits_for_a_lock_before_it_answers_busy(settings):
    """SQLite: WAL (readers never wait), FULL sync, the busy timeout; PostgreSQL: the same wait as lock_timeout."""
    from django.db import connection

    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            assert cursor.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
            assert cursor.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
            assert cursor.execute("PRAGMA busy_timeout").fetchone()[0] == settings.DB_BUSY_TIMEOUT_S * 1000
            assert connection.transaction_mode == "IMMEDIATE"
        else:
            cursor.execute("SHOW lock_timeout")
            assert cursor.fetchone()[0] == f"{int(settings.DB_BUSY_TIMEOUT_S)}s"
    assert not connection.settings_dict["ATOMIC_REQUESTS"], "a read-only page must not open a transaction"


def test_a_request_error_is_printed_once():
    """Django's own console handler (DEBUG) beside the root's printed every 403 twice."""
    import logging

    django_logger = logging.getLogger("django")
    assert django_logger.propagate
    assert not [h for h in django_logger.handlers if isinstance(h, logging.StreamHandler)]


def test_an_upload_limit_below_one_stops_with_its_name():
    result = manage("check", DEBUG="true", TAKEHOME_UPLOAD_MAX_FILES="0")
    assert result.returncode != 0
    assert "TAKEHOME_UPLOAD_MAX_FILES=0 is too small: give a whole number, at least 1." in result.stderr


def stopped_with(result) -> str:
    """The one line a settings error prints: no traceback before it, nothing after."""
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    assert lines[0].startswith("takehome cannot start: ")
    return lines[0]


@pytest.mark.parametrize("name, value, says", [
    # negative counts and durations
    ("TAKEHOME_UPLOAD_IN_FLIGHT_S", "-3", "TAKEHOME_UPLOAD_IN_FLIGHT_S=-3 is negative: give a duration in seconds, "
                                          "0 or more."),
    ("TAKEHOME_UPLOAD_MAX_COUNT", "-1", "TAKEHOME_UPLOAD_MAX_COUNT=-1 is negative: give a whole number, 0 or more."),
    ("TAKEHOME_WARM_SANDBOXES", "-2", "TAKEHOME_WARM_SANDBOXES=-2 is negative: give a whole number, 0 or more."),
    ("TAKEHOME_DB_BUSY_TIMEOUT_S", "-1", "TAKEHOME_DB_BUSY_TIMEOUT_S=-1 is negative: give a duration in seconds, "
                                         "more than 0."),
    ("TAKEHOME_LOGIN_LOCKOUT_MINUTES", "0", "TAKEHOME_LOGIN_LOCKOUT_MINUTES=0 is too small: give a duration in "
                                            "minutes, at least 1."),
    # not a number
    ("TAKEHOME_UPLOAD_GRACE_S", "five", "TAKEHOME_UPLOAD_GRACE_S=five is not a whole number of seconds: write e.g. "
                                        "300."),
    ("TAKEHOME_UPLOAD_GRACE_S", "1.5", "TAKEHOME_UPLOAD_GRACE_S=1.5 is not a whole number of seconds"),
    ("TAKEHOME_SANDBOX_SLOTS", "16x", "TAKEHOME_SANDBOX_SLOTS=16x is not a whole number: write e.g. 16."),
    ("TAKEHOME_MODEL_TIMEOUT_S", "1m", "TAKEHOME_MODEL_TIMEOUT_S=1m is not a number of seconds: write e.g. 60."),
    ("TAKEHOME_WORKSPACE_CPUS", "nan", "TAKEHOME_WORKSPACE_CPUS=nan is not a number: write e.g. 1."),
    # unknown choice
    ("TAKEHOME_SANDBOX_CAPS", "cgroup3", "TAKEHOME_SANDBOX_CAPS=cgroup3 is not one of the choices: write auto, "
                                         "cgroup2, cgroup1 or rlimit."),
    ("TAKEHOME_CHANNEL_LAYER", "rabbit", "TAKEHOME_CHANNEL_LAYER=rabbit is not one of the choices: write redis or "
                                         "memory."),
    ("LOG_LEVEL", "loud", "LOG_LEVEL=loud is not one of the choices: write DEBUG, INFO, WARNING, ERROR or CRITICAL."),
    ("TAKEHOME_LOG_FORMAT", "xml", "TAKEHOME_LOG_FORMAT=xml is not one of the choices: write text or json."),
    ("TAKEHOME_STORAGE", "gcs", "TAKEHOME_STORAGE=gcs is not one of the choices: write filesystem or s3."),
    # a metrics token short enough to guess; a secret is never repeated
    ("TAKEHOME_METRICS_TOKEN", "hunter2", "TAKEHOME_METRICS_TOKEN is shorter than 16 characters"),
    # bad boolean
    ("SECURE_HSTS_PRELOAD", "maybe", "SECURE_HSTS_PRELOAD=maybe is not a boolean: write true or false."),
    ("SECURE_SSL_REDIRECT", "2", "SECURE_SSL_REDIRECT=2 is not a boolean: write true or false."),
    # URLs; a password is never repeated
    ("DATABASE_URL", "mongo://u:hunter2@db/x", "DATABASE_URL=mongo://u:***@db/x is not a database URL"),
    ("EMAIL_URL", "smtp+xyz://mail", "EMAIL_URL=smtp+xyz://mail is not an email URL"),
    ("SITE_URL", "takehome.example.com", "SITE_URL=takehome.example.com does not start with http:// or https://"),
    ("TAKEHOME_S3_ENDPOINT_URL", "minio:9000", "TAKEHOME_S3_ENDPOINT_URL=minio:9000 does not start with http:// or "
                                               "https://: write e.g. http://minio:9000."),
])
def test_a_value_the_settings_cannot_use_stops_the_process_naming_it(name, value, says):
    line = stopped_with(manage("check", DEBUG="true", **{name: value}))
    assert says in line
    assert "hunter2" not in line


def test_a_secret_file_that_cannot_be_read_is_named(tmp_path):
    line = stopped_with(manage("check", DEBUG="true", TAKEHOME_MODEL_KEY_FILE=str(tmp_path / "missing")))
    assert f"TAKEHOME_MODEL_KEY_FILE={tmp_path / 'missing'} cannot be read" in line


def test_an_empty_value_means_the_default():
    """A copy of .env.example leaves optional lines empty: NAME= must mean the default, never '' or false."""
    result = manage("shell", "-c", "from django.conf import settings as s; "
                    "print(s.MEDIA_ROOT == s.VAR_DIR / 'media', s.SECURE_SSL_REDIRECT, s.RETRY_AFTER_BUSY_S)",
                    DEBUG="false", SECRET_KEY=secrets.token_urlsafe(50), ALLOWED_HOSTS="takehome.example.com",
                    TAKEHOME_MEDIA_ROOT="", SECURE_SSL_REDIRECT="", TAKEHOME_RETRY_AFTER_BUSY_S=" ")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1].split() == ["True", "True", "5"]


def test_the_model_key_file_wins_over_the_key(tmp_path):
    key = tmp_path / "model-key"
    key.write_text("sk-from-file\n")
    result = manage("shell", "-c", "from django.conf import settings; print(settings.MODEL_KEY)", DEBUG="true",
                    TAKEHOME_MODEL_KEY="sk-from-env", TAKEHOME_MODEL_KEY_FILE=str(key))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "sk-from-file"


@pytest.mark.parametrize("env, words", [
    ({"TAKEHOME_MODEL_URL": "127.0.0.1:11434/v1", "TAKEHOME_MODEL_NAME": "m"}, "does not start with http://"),
    ({"TAKEHOME_MODEL_URL": "http://127.0.0.1:11434/v1", "TAKEHOME_MODEL_NAME": ""}, "TAKEHOME_MODEL_NAME is not"),
])
def test_a_model_url_that_cannot_work_stops_the_process(env, words):
    result = manage("check", DEBUG="true", **env)
    assert result.returncode != 0 and words in result.stderr


S3 = {"TAKEHOME_STORAGE": "s3", "TAKEHOME_S3_BUCKET": "takehome", "TAKEHOME_S3_ENDPOINT_URL": "http://minio:9000",
      "TAKEHOME_S3_REGION": "us-east-1", "TAKEHOME_S3_ACCESS_KEY_ID": "takehome",
      "TAKEHOME_S3_SECRET_ACCESS_KEY": "hunter2-hunter2"}


@pytest.mark.parametrize("drop, says", [
    ("TAKEHOME_S3_BUCKET", "TAKEHOME_STORAGE=s3 needs TAKEHOME_S3_BUCKET: name the bucket that every host shares"),
    ("TAKEHOME_S3_SECRET_ACCESS_KEY", "TAKEHOME_S3_ACCESS_KEY_ID and TAKEHOME_S3_SECRET_ACCESS_KEY go together"),
    ("TAKEHOME_S3_ACCESS_KEY_ID", "TAKEHOME_S3_ACCESS_KEY_ID and TAKEHOME_S3_SECRET_ACCESS_KEY go together"),
])
def test_a_bucket_storage_that_cannot_work_stops_the_process_naming_what_is_missing(drop, says):
    line = stopped_with(manage("check", DEBUG="true", **{**S3, drop: ""}))
    assert says in line and "hunter2" not in line


def test_the_bucket_storage_is_django_storages_s3_backend_on_the_server_named():
    show = ("from django.core.files.storage import default_storage as s; print(s.__class__.__name__, "
            "s.bucket_name, s.endpoint_url, s.region_name, s.access_key, s.client_config.s3['addressing_style'])")
    result = manage("shell", "-c", show, DEBUG="true", **S3)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split()[-6:] == ["S3Storage", "takehome", "http://minio:9000", "us-east-1", "takehome", "path"]
    local = manage("shell", "-c", "from django.core.files.storage import default_storage as s; "
                   "print(s.__class__.__module__, s.__class__.__name__)", DEBUG="true")
    assert local.stdout.split()[-2:] == ["shared.stored", "FileSystemStorage"]
