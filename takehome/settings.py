"""Settings for takehome, read from the environment.

Every variable is listed with its default in `.env.example`. Conventional names
stay unprefixed (SECRET_KEY, DEBUG, DATABASE_URL, ...); our own knobs start
with TAKEHOME_. A bad value stops the process with a message, never a guess.
"""

import os
import socket
import sys
from datetime import timedelta
from pathlib import Path

import environ
from csp.constants import NONE, SELF
from django.core.exceptions import ImproperlyConfigured

from grading.cgroups import MODES as SANDBOX_CAP_MODES
from grading.cgroups import TMPFS_MODES as SANDBOX_TMPFS_MODES
from grading.runner import sandbox_home

BASE_DIR = Path(__file__).resolve().parent.parent
env = environ.Env()


def _read_env_file() -> None:
    """Fill in the environment from the checkout's .env (make writes one for development).

    Variables already in the environment win. TAKEHOME_ENV_FILE names another
    file, or none when empty. why not under pytest: tests must not depend on
    a developer's .env (its port, its key); they set what they need.
    """
    default = "" if "pytest" in sys.modules else str(BASE_DIR / ".env")
    name = os.environ.get("TAKEHOME_ENV_FILE", default)
    if not name:
        return
    path = Path(name)
    if path.is_file():
        environ.Env.read_env(path, overwrite=False)
    elif "TAKEHOME_ENV_FILE" in os.environ:
        raise ImproperlyConfigured(f"TAKEHOME_ENV_FILE={name} is not a file.")


_read_env_file()

# The development key is public (it is in this file): it may only ever sign
# cookies on a developer's machine. Production mode refuses it below.
DEV_SECRET_KEY = "django-insecure-takehome-development-key-never-use-in-production"
# The keys make writes into a development .env (scripts/dotenv.py) start with this.
DEV_KEY_PREFIX = "django-insecure-takehome-dev-"

TRUE_WORDS = {"1", "true", "yes", "on"}
FALSE_WORDS = {"0", "false", "no", "off", ""}


def env_bool(name: str, default: bool) -> bool:
    """A boolean variable; anything but true/false/1/0/yes/no/on/off stops the process."""
    raw = env.str(name, default=str(default)).strip().lower()
    if raw in TRUE_WORDS:
        return True
    if raw in FALSE_WORDS:
        return False
    raise ImproperlyConfigured(f"{name}={raw!r} is not a boolean: use true or false.")


DEBUG = env_bool("DEBUG", default=False)


def _secret(name: str, default: str | None) -> str | None:
    """Read NAME, or the file named by NAME_FILE (as Docker secrets are mounted)."""
    file_name = env.str(f"{name}_FILE", default="")
    if file_name:
        try:
            return Path(file_name).read_text().strip()
        except OSError as exc:
            raise ImproperlyConfigured(f"{name}_FILE={file_name} cannot be read: {exc}") from exc
    return env.str(name, default=default)


SECRET_KEY = _secret("SECRET_KEY", default=DEV_SECRET_KEY if DEBUG else None)
if not SECRET_KEY:
    raise ImproperlyConfigured(
        "SECRET_KEY is not set. Set SECRET_KEY (or SECRET_KEY_FILE) to a long random "
        "string, or set DEBUG=true on a development machine."
    )
if not DEBUG and (SECRET_KEY == DEV_SECRET_KEY or SECRET_KEY.startswith(DEV_KEY_PREFIX)):
    raise ImproperlyConfigured(
        "Refusing to start in production mode (DEBUG=false) with a development "
        "SECRET_KEY (the built-in one, or one make wrote into .env). Generate one with: "
        "python -c 'import secrets; print(secrets.token_urlsafe(50))'"
    )

ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["127.0.0.1", "localhost"] if DEBUG else [])
# Candidate links are absolute: they go out by email and on the command line.
SITE_URL = env.str("SITE_URL", default="http://127.0.0.1:8000").rstrip("/")
CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS", default=[SITE_URL])

# Everything the app writes lives under one folder: the SQLite file, the
# private Redis, uploads, the sandbox's runner virtualenv and scratch space.
VAR_DIR = Path(env.str("TAKEHOME_VAR_DIR", default=str(BASE_DIR / "var"))).resolve()
try:
    VAR_DIR.mkdir(parents=True, exist_ok=True)  # SQLite cannot create its own folder
except OSError:
    pass  # a read-only image: whatever needs the folder says so itself

INSTALLED_APPS = [
    # First, so `manage.py runserver` serves the ASGI app (WebSockets too) in development.
    "daphne",
    "channels",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "django_htmx",
    "csp",
    "template_partials",
    "axes",
    "shared",
    "takehome",
    "sessions_app",
    "grading",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "csp.middleware.CSPMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    # A write that cannot be done now (busy database, full disk) answers 503 with Retry-After.
    "takehome.unavailable.UnavailableMiddleware",
    # Last, as django-axes asks: turns a locked-out login into the page saying when to try again.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "takehome.urls"
WSGI_APPLICATION = "takehome.wsgi.application"
ASGI_APPLICATION = "takehome.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASES = {
    "default": env.db("DATABASE_URL", default=f"sqlite:///{VAR_DIR / 'db.sqlite3'}"),
}
# How long a write waits for another request's lock before it gives up; the
# request then answers 503 with Retry-After (takehome/unavailable.py), never a 500.
# why well under gate.py's 30 s: the candidate must get that answer, not a timeout.
DB_BUSY_TIMEOUT_S = env.float("TAKEHOME_DB_BUSY_TIMEOUT_S", default=10.0)
if DB_BUSY_TIMEOUT_S <= 0:
    raise ImproperlyConfigured(f"TAKEHOME_DB_BUSY_TIMEOUT_S={DB_BUSY_TIMEOUT_S} must be more than 0 seconds.")
_db_options = DATABASES["default"].setdefault("OPTIONS", {})
if DATABASES["default"]["ENGINE"].endswith("sqlite3"):
    # A worker process in the integration tests must see the test database,
    # so it is a file, never SQLite's in-memory default; one per test run, so
    # two runs on one machine never share it (workers are given its path).
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / f"test-db-{os.getpid()}.sqlite3")}
    _db_options["timeout"] = DB_BUSY_TIMEOUT_S
    # why WAL: readers never wait for the writer (nor it for them), so pages keep
    # serving while an upload or a grading commits. why synchronous=FULL: a commit
    # answered "stored" survives a power cut too; in WAL it costs one fsync of the
    # log per commit (about 0.5 ms here), and uploads are few.
    _db_options["init_command"] = "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL"
    # why IMMEDIATE: select_for_update is a no-op on SQLite, and a transaction that
    # reads before it writes (an upload checking the limits, a refusal moving the
    # review flag) fails at once with "database is locked" when another one writes
    # first. Taking the write lock at BEGIN makes them wait their turn instead.
    _db_options["transaction_mode"] = "IMMEDIATE"
elif DATABASES["default"]["ENGINE"].endswith("postgresql"):
    # The same promise on PostgreSQL: a row lock (select_for_update) waited for
    # longer than this fails with lock_not_available, answered as 503.
    _lock_timeout = f"-c lock_timeout={int(DB_BUSY_TIMEOUT_S * 1000)}"
    _db_options["options"] = f"{_db_options.get('options', '')} {_lock_timeout}".strip()
# Seconds a client is told to wait (Retry-After) when a write could not be done:
# BUSY when another write held the lock; FAULT when the disk is full or the
# database refuses writes or cannot be reached (an operator has to act).
RETRY_AFTER_BUSY_S = env.int("TAKEHOME_RETRY_AFTER_BUSY_S", default=5)
RETRY_AFTER_FAULT_S = env.int("TAKEHOME_RETRY_AFTER_FAULT_S", default=60)
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
# why axes first: it refuses a locked-out login before any password is checked.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
# Failed logins (django-axes): after LOGIN_FAILURE_LIMIT failures for one
# username from one address, that pair is refused for LOGIN_LOCKOUT_MINUTES,
# counted again from each attempt made while locked out. Another address, or
# another username from the same address, is not affected. A success clears the count.
AXES_FAILURE_LIMIT = env.int("TAKEHOME_LOGIN_FAILURE_LIMIT", default=5)
LOGIN_LOCKOUT_MINUTES = env.int("TAKEHOME_LOGIN_LOCKOUT_MINUTES", default=15)
for _name, _value in (("TAKEHOME_LOGIN_FAILURE_LIMIT", AXES_FAILURE_LIMIT),
                      ("TAKEHOME_LOGIN_LOCKOUT_MINUTES", LOGIN_LOCKOUT_MINUTES)):
    if _value < 1:
        raise ImproperlyConfigured(f"{_name}={_value} must be at least 1.")
AXES_COOLOFF_TIME = timedelta(minutes=LOGIN_LOCKOUT_MINUTES)
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_VERBOSE = False  # why: otherwise every manage.py command starts with axes' banner
AXES_LOCKOUT_CALLABLE = "takehome.team.views.locked_out"
# An invited member's set-password link works this long (and once). Django's default is 3 days.
PASSWORD_RESET_TIMEOUT = env.int("TAKEHOME_SET_PASSWORD_LINK_DAYS", default=3) * 24 * 3600
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = env.str("TIME_ZONE", default="UTC")
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = Path(env.str("TAKEHOME_STATIC_ROOT", default=str(BASE_DIR / "staticfiles")))
MEDIA_ROOT = Path(env.str("TAKEHOME_MEDIA_ROOT", default=str(VAR_DIR / "media")))
MEDIA_URL = "/media-not-served/"  # uploads are never served directly
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": (
            "django.contrib.staticfiles.storage.StaticFilesStorage"
            if DEBUG
            else "whitenoise.storage.CompressedManifestStaticFilesStorage"
        )
    },
}

EMAIL_CONFIG = env.email_url("EMAIL_URL", default="consolemail://")
globals().update(EMAIL_CONFIG)
DEFAULT_FROM_EMAIL = env.str("DEFAULT_FROM_EMAIL", default="takehome <takehome@localhost>")

# Production hardening: on whenever DEBUG is off, so `check --deploy` is clean.
# TLS ends at the proxy in front (Caddy in docker-compose.yml), which tells us the
# client's scheme in X-Forwarded-Proto. why trusting it is sound: the proxy sets the
# header itself, replacing the client's (Caddy does; the README says what another
# proxy must do), and daphne is reachable only through the proxy.
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", default=not DEBUG)
SESSION_COOKIE_SECURE = not DEBUG
CSRF_COOKIE_SECURE = not DEBUG
SECURE_HSTS_SECONDS = env.int("SECURE_HSTS_SECONDS", default=0 if DEBUG else 31536000)
SECURE_HSTS_INCLUDE_SUBDOMAINS = not DEBUG
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", default=False)
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
# Content-Security-Policy (django-csp): scripts and styles come only from our own
# static files; no inline <script>, no inline style, no eval, on every page and
# in DEBUG too, so a violation shows up while developing (and in the browser
# tests), not first in production. Images may be data: URLs (the favicon).
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF],
        "style-src": [SELF],
        "img-src": [SELF, "data:"],
        # 'self' covers the hosted terminal's WebSocket (ws:/wss: of the same host, CSP Level 3),
        # without opening connect-src to every other host's wss:.
        "connect-src": [SELF],
        "font-src": [SELF],
        "object-src": [NONE],
        "base-uri": [NONE],
        "form-action": [SELF],
        "frame-ancestors": [NONE],
    },
}

if not DEBUG and not SECURE_HSTS_PRELOAD:
    SILENCED_SYSTEM_CHECKS = ["security.W021"]  # preload is a choice, not a default

# Celery. The broker is Redis everywhere: by default a private redis-server
# that `make run` starts on a unix socket under VAR_DIR.
REDIS_SOCKET = VAR_DIR / "redis" / "redis.sock"
CELERY_BROKER_URL = env.str("CELERY_BROKER_URL", default=f"redis+socket://{REDIS_SOCKET}")
# Channels' layer (the hosted terminal: closing every socket of an invitation) lives on the
# same Redis as the broker. TAKEHOME_CHANNEL_LAYER=memory keeps it in the process instead:
# only for tests and a single daphne process.
def _redis_for_channels(broker: str) -> str:
    if broker.startswith("redis+socket://"):
        return "unix://" + broker.removeprefix("redis+socket://")
    return broker


if env.str("TAKEHOME_CHANNEL_LAYER", default="redis") == "memory":
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels_redis.core.RedisChannelLayer",
                                  # why socket_timeout: redis-py 8 reads with a 5 s timeout by default,
                                  # and channels_redis waits 5 s for a message (BZPOPMIN): the read timed
                                  # out and closed every idle terminal after a few seconds.
                                  "CONFIG": {"hosts": [{"address": _redis_for_channels(CELERY_BROKER_URL),
                                                        "socket_timeout": 30}],
                                             "prefix": "takehome-channels"}}}
# The hosted terminal's recording (asciicast) stops recording past this size, and says so.
RECORDING_MAX_BYTES = env.int("TAKEHOME_RECORDING_MAX_MB", default=20) * 1024 * 1024
CELERY_TASK_SERIALIZER = "json"  # ids only, never pickle
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_RESULT_BACKEND = None
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# Grading's hard time limit; the visibility timeout must stay above it, or a
# slow task is delivered a second time while the first still runs.
GRADING_TIME_LIMIT_S = env.int("TAKEHOME_GRADING_TIME_LIMIT_S", default=600)
# Sending a grading message from a request gives up after this many seconds
# (connect, and each reply), without retrying, when the broker is down or
# stalls: the upload is already stored, and the sweep sends the message later.
# The worker's own connection keeps the defaults (grading/publish.py says why).
BROKER_SEND_TIMEOUT_S = env.float("TAKEHOME_BROKER_SEND_TIMEOUT_S", default=1.0)
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "visibility_timeout": max(3600, 2 * (GRADING_TIME_LIMIT_S + 60)),
}
CELERY_TIMEZONE = TIME_ZONE
CELERY_BEAT_SCHEDULE_FILENAME = str(VAR_DIR / "celerybeat-schedule")
CELERY_BEAT_SCHEDULE = {
    "record-heartbeat": {"task": "shared.tasks.record_heartbeat", "schedule": 30.0},
    "sweep-submissions": {"task": "grading.tasks.sweep_submissions", "schedule": 60.0},
    "sweep-packet-checks": {"task": "takehome.tasks.sweep_packet_checks", "schedule": 60.0},
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"client_errors": {"()": "shared.logs.NoTracebackForClientErrors"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "filters": ["client_errors"]}},
    "root": {"handlers": ["console"], "level": env.str("LOG_LEVEL", default="INFO")},
    # why: in DEBUG, Django's own "django" logger has a console handler too, so a
    # 403 or 404 printed its traceback twice; everything goes through the root's.
    "loggers": {"django": {"handlers": [], "propagate": True}},
}

# Grading. The sandbox runs candidate code as unprivileged uids, so the runner
# virtualenv and the scratch folder must sit where any user can traverse.
# Under VAR_DIR when every folder above it lets other users through, else
# under /var/tmp/takehome-<hash> (see grading.runner.sandbox_home).
SANDBOX_HOME = sandbox_home(VAR_DIR)
GRADING_RUNNER_DIR = Path(env.str("TAKEHOME_RUNNER_DIR", default=str(SANDBOX_HOME / "runner")))
GRADING_SCRATCH_DIR = Path(env.str("TAKEHOME_SCRATCH_DIR", default=str(SANDBOX_HOME / "scratch")))
# Packets that need more than pytest (a requirements.txt, another Python) run in
# a virtualenv of their own, built once per (Python, requirements) under
# RUNNERS_DIR (grading/runner.py); PYTHONS lists the interpreters a packet may
# choose from, the first being the default; PIP_INDEX_URL, when set, is the
# package index those builds use (else pip's own configuration decides).
GRADING_RUNNERS_DIR = Path(env.str("TAKEHOME_RUNNERS_DIR", default=str(SANDBOX_HOME / "runners")))
GRADING_PYTHONS = env.list("TAKEHOME_PYTHONS", default=["/usr/bin/python3"])
GRADING_PIP_INDEX_URL = env.str("TAKEHOME_PIP_INDEX_URL", default="")
GRADING_UID_BASE = env.int("TAKEHOME_SANDBOX_UID_BASE", default=62000)
# why 16: each worker process keeps TAKEHOME_WARM_SANDBOXES pre-started sandboxes,
# each holding a uid while it waits, beside its cold runs (the hidden tests' two).
GRADING_SANDBOX_SLOTS = env.int("TAKEHOME_SANDBOX_SLOTS", default=16)
# Pre-started single-use sandboxes per worker process, pytest imported, waiting for
# one run each (grading/sandbox.py, "warm sandboxes"); 0 turns them off. One that
# waits longer than TAKEHOME_WARM_IDLE_S seconds is ended and its uid freed.
GRADING_WARM_SANDBOXES = env.int("TAKEHOME_WARM_SANDBOXES", default=6)
GRADING_WARM_IDLE_S = env.int("TAKEHOME_WARM_IDLE_S", default=300)
if GRADING_WARM_SANDBOXES < 0 or GRADING_WARM_IDLE_S < 1:
    raise ImproperlyConfigured("TAKEHOME_WARM_SANDBOXES must be 0 (off) or more, TAKEHOME_WARM_IDLE_S at least 1.")
GRADING_RUN_WALL_S = env.int("TAKEHOME_RUN_WALL_S", default=60)
# Caps on each sandboxed run as a whole (grading/cgroups.py): the memory of all
# its processes together, its processes, and files per tmpfs (/tree, /tmp,
# /dev/shm). TAKEHOME_SANDBOX_CAPS picks how: auto (the strongest that works
# here), cgroup2, cgroup1, or rlimit (per-process limits, at most
# FALLBACK_PROCESSES processes sharing MEMORY_MB); TAKEHOME_SANDBOX_TMPFS: auto,
# mount (per-run tmpfs mounts with an inode cap; needs root) or bwrap (no inode cap).
GRADING_SANDBOX_MEMORY_MB = env.int("TAKEHOME_SANDBOX_MEMORY_MB", default=1024)
GRADING_SANDBOX_PROCESSES = env.int("TAKEHOME_SANDBOX_PROCESSES", default=64)
GRADING_SANDBOX_TMPFS_INODES = env.int("TAKEHOME_SANDBOX_TMPFS_INODES", default=16384)
GRADING_SANDBOX_FALLBACK_PROCESSES = env.int("TAKEHOME_SANDBOX_FALLBACK_PROCESSES", default=8)
GRADING_SANDBOX_CAPS = env.str("TAKEHOME_SANDBOX_CAPS", default="auto")
GRADING_SANDBOX_TMPFS = env.str("TAKEHOME_SANDBOX_TMPFS", default="auto")
for _name, _value, _choices in (("TAKEHOME_SANDBOX_CAPS", GRADING_SANDBOX_CAPS, SANDBOX_CAP_MODES),
                                ("TAKEHOME_SANDBOX_TMPFS", GRADING_SANDBOX_TMPFS, SANDBOX_TMPFS_MODES)):
    if _value not in _choices:
        raise ImproperlyConfigured(f"{_name}={_value!r} is not one of {', '.join(_choices)}.")
# why at least 3: bubblewrap, its shell and pytest are three processes of the run's uid.
for _name, _value, _least in (("TAKEHOME_SANDBOX_MEMORY_MB", GRADING_SANDBOX_MEMORY_MB, 64),
                              ("TAKEHOME_SANDBOX_PROCESSES", GRADING_SANDBOX_PROCESSES, 3),
                              ("TAKEHOME_SANDBOX_TMPFS_INODES", GRADING_SANDBOX_TMPFS_INODES, 64),
                              ("TAKEHOME_SANDBOX_FALLBACK_PROCESSES", GRADING_SANDBOX_FALLBACK_PROCESSES, 3)):
    if _value < _least:
        raise ImproperlyConfigured(f"{_name}={_value} is too small: at least {_least}.")
# Hosted sessions (step 10): one sandboxed workspace per invitation under
# WORKSPACES_DIR, each shell under its own uid from UID_BASE + [0, SLOTS) (kept
# apart from the grading uids), with its own caps: DISK_MB of files, MEMORY_MB
# for all its processes, PROCESSES, CPUS cores. A shell idle IDLE_MINUTES is
# stopped and its files saved (`manage.py serve_workspaces` sweeps); the next
# visit starts it again.
WORKSPACES_DIR = Path(env.str("TAKEHOME_WORKSPACES_DIR", default="") or VAR_DIR / "workspaces")
# Which server holds a workspace: its files and shell live on one host only (see the README's
# "Hosted sessions" under Speed); each host serves and sweeps its own workspaces.
WORKSPACE_HOST = env.str("TAKEHOME_WORKSPACE_HOST", default="") or socket.gethostname()
WORKSPACE_UID_BASE = env.int("TAKEHOME_WORKSPACE_UID_BASE", default=63000)
WORKSPACE_SLOTS = env.int("TAKEHOME_WORKSPACE_SLOTS", default=500)
WORKSPACE_DISK_MB = env.int("TAKEHOME_WORKSPACE_DISK_MB", default=64)
WORKSPACE_MEMORY_MB = env.int("TAKEHOME_WORKSPACE_MEMORY_MB", default=512)
WORKSPACE_PROCESSES = env.int("TAKEHOME_WORKSPACE_PROCESSES", default=128)
WORKSPACE_CPUS = env.float("TAKEHOME_WORKSPACE_CPUS", default=1.0)
WORKSPACE_IDLE_MINUTES = env.int("TAKEHOME_WORKSPACE_IDLE_MINUTES", default=30)
for _name, _value, _least in (("TAKEHOME_WORKSPACE_SLOTS", WORKSPACE_SLOTS, 1),
                              ("TAKEHOME_WORKSPACE_DISK_MB", WORKSPACE_DISK_MB, 1),
                              ("TAKEHOME_WORKSPACE_MEMORY_MB", WORKSPACE_MEMORY_MB, 64),
                              ("TAKEHOME_WORKSPACE_PROCESSES", WORKSPACE_PROCESSES, 8),
                              ("TAKEHOME_WORKSPACE_IDLE_MINUTES", WORKSPACE_IDLE_MINUTES, 1)):
    if _value < _least:
        raise ImproperlyConfigured(f"{_name}={_value} is too small: at least {_least}.")
if WORKSPACE_CPUS <= 0:
    raise ImproperlyConfigured(f"TAKEHOME_WORKSPACE_CPUS={WORKSPACE_CPUS} must be above 0.")
_ws_uids, _grading_uids = (range(WORKSPACE_UID_BASE, WORKSPACE_UID_BASE + WORKSPACE_SLOTS),
                           range(GRADING_UID_BASE, GRADING_UID_BASE + GRADING_SANDBOX_SLOTS))
if _ws_uids.start < _grading_uids.stop and _grading_uids.start < _ws_uids.stop:
    raise ImproperlyConfigured("TAKEHOME_WORKSPACE_UID_BASE and SLOTS overlap the grading sandbox's uids "
                               "(TAKEHOME_SANDBOX_UID_BASE): give workspaces a range of their own.")
# The sweep sends grading again for an upload whose message was never sent
# (the broker was down) after STALE_RECEIVED_S, and for one whose message was
# sent STALE_QUEUED_S ago (each send restarts the clock) and is no longer in
# Redis; when Redis cannot be asked, a message that old is presumed lost.
GRADING_STALE_RECEIVED_S = env.int("TAKEHOME_STALE_RECEIVED_S", default=30)
GRADING_STALE_QUEUED_S = env.int("TAKEHOME_STALE_QUEUED_S", default=600)
# While grading, the worker's process notes it is alive every HEARTBEAT_S; a run
# whose heartbeat is older than LOST_AFTER_S (default: 3 heartbeats) is lost (its
# worker died) and the sweep sends the submission again.
GRADING_HEARTBEAT_S = env.int("TAKEHOME_GRADING_HEARTBEAT_S", default=15)
GRADING_LOST_AFTER_S = env.int("TAKEHOME_GRADING_LOST_AFTER_S", default=3 * GRADING_HEARTBEAT_S)
if not 0 < GRADING_HEARTBEAT_S < GRADING_LOST_AFTER_S:
    raise ImproperlyConfigured(
        f"TAKEHOME_GRADING_HEARTBEAT_S={GRADING_HEARTBEAT_S} must be at least 1 and below "
        f"TAKEHOME_GRADING_LOST_AFTER_S={GRADING_LOST_AFTER_S} (3 heartbeats is a good margin).")
# Red to green witnessed faster than this (seconds) is named on the review page:
# no time to ask a model, read the reply and apply a fix.
GRADING_MIN_RED_TO_GREEN_S = env.int("TAKEHOME_MIN_RED_TO_GREEN_S", default=20)

# Cache: the per-address limit on link look-ups counts here. The default is
# per process (fine for one web process); give several processes one count
# with a shared cache, e.g. CACHE_URL=redis://redis:6379/1.
CACHES = {"default": env.cache("CACHE_URL", default="locmemcache://")}

# The candidate's side.
# Look-ups of unknown or revoked links per client address per minute; past it,
# every link look-up from that address gets 429 for the rest of the minute.
# Requests on a valid link never count (they have per-invitation limits), so
# forty candidates behind one office address are never refused.
# why: tokens are unguessable, but nobody gets to try millions of them either.
TOKEN_LOOKUPS_PER_MINUTE = env.int("TAKEHOME_TOKEN_LOOKUPS_PER_MINUTE", default=240)
# Largest upload accepted, in bytes, checked from Content-Length and again while streaming.
UPLOAD_MAX_BYTES = env.int("TAKEHOME_UPLOAD_MAX_BYTES", default=20 * 1024 * 1024)
# What one upload may unpack to, checked by the grader on inflated bytes (virtualenvs, .git and
# caches are left out first and do not count): files, bytes per file, bytes in all. Past any,
# the upload is not accepted and the candidate's page says which limit and by what.
UPLOAD_MAX_FILES = env.int("TAKEHOME_UPLOAD_MAX_FILES", default=2000)
UPLOAD_MAX_FILE_BYTES = env.int("TAKEHOME_UPLOAD_MAX_FILE_BYTES", default=10 * 1024 * 1024)
UPLOAD_MAX_UNPACKED_BYTES = env.int("TAKEHOME_UPLOAD_MAX_UNPACKED_BYTES", default=50 * 1024 * 1024)
for _name in ("UPLOAD_MAX_BYTES", "UPLOAD_MAX_FILES", "UPLOAD_MAX_FILE_BYTES", "UPLOAD_MAX_UNPACKED_BYTES"):
    if globals()[_name] < 1:
        raise ImproperlyConfigured(f"TAKEHOME_{_name}={globals()[_name]} must be at least 1.")
# Uploads (and gate steps) are still accepted this many seconds after the deadline (a slow network, a last save).
UPLOAD_GRACE_S = env.int("TAKEHOME_UPLOAD_GRACE_S", default=300)
# Per invitation: at most one upload every so many seconds, and so many in all;
# past either, 429 with a message the candidate can act on. 0 turns a limit off.
UPLOAD_INTERVAL_S = env.int("TAKEHOME_UPLOAD_INTERVAL_S", default=10)
UPLOAD_MAX_COUNT = env.int("TAKEHOME_UPLOAD_MAX_COUNT", default=30)
# The model window (sessions_app/model_window.py): an OpenAI-compatible chat API the
# candidate reaches through /t/<token>/model/v1 once a red run is witnessed. The
# base URL ends before /chat/completions, e.g. http://127.0.0.1:11434/v1 for Ollama;
# empty: no model is provided, and candidates use their own. The key (or the file
# holding it) is sent to that URL only, never shown or logged.
MODEL_URL = env.str("TAKEHOME_MODEL_URL", default="").rstrip("/")
MODEL_NAME = env.str("TAKEHOME_MODEL_NAME", default="")
MODEL_KEY = _secret("TAKEHOME_MODEL_KEY", default="")
MODEL_TIMEOUT_S = env.float("TAKEHOME_MODEL_TIMEOUT_S", default=60.0)
# Caps per invitation (requests, tokens in and out) and per request (body bytes, max_tokens asked for).
MODEL_MAX_REQUESTS = env.int("TAKEHOME_MODEL_MAX_REQUESTS", default=100)
MODEL_MAX_TOKENS = env.int("TAKEHOME_MODEL_MAX_TOKENS", default=60_000)
MODEL_MAX_REQUEST_BYTES = env.int("TAKEHOME_MODEL_MAX_REQUEST_BYTES", default=64 * 1024)
MODEL_MAX_REPLY_TOKENS = env.int("TAKEHOME_MODEL_MAX_REPLY_TOKENS", default=4096)
if MODEL_URL and not MODEL_URL.startswith(("http://", "https://")):
    raise ImproperlyConfigured(f"TAKEHOME_MODEL_URL={MODEL_URL} must start with http:// or https://.")
if MODEL_URL and not MODEL_NAME:
    raise ImproperlyConfigured("TAKEHOME_MODEL_URL is set but TAKEHOME_MODEL_NAME is not: name the model to ask.")
# Form fields other than files (and a gate receipt's JSON body) may hold this much.
DATA_UPLOAD_MAX_MEMORY_SIZE = 4 * 1024 * 1024
DATA_UPLOAD_MAX_NUMBER_FILES = 5
# Uploads on other pages (a recruiter's packet zips) go to disk past 1 MB.
FILE_UPLOAD_MAX_MEMORY_SIZE = 1024 * 1024
