"""Settings for takehome, read from the environment.

Every variable is read once, through `env` (shared/settings_env.py), which
declares its type, default, bounds and one line for the docs: the settings
table in docs/settings.md is rendered from those declarations, and the tests
check that nothing here reads the environment around them and that
`.env.example` names the same variables. Conventional names stay unprefixed
(SECRET_KEY, DEBUG, DATABASE_URL, ...); our own knobs start with TAKEHOME_. A
bad value stops the process with a message naming the variable, never a guess.
"""

import importlib.util
import os
import socket
import sys
from datetime import timedelta
from pathlib import Path

from csp.constants import NONE, SELF
from whitenoise.compress import Compressor

from grading.engine.runner import sandbox_home
from grading.engine.sandbox.cgroups import MODES as SANDBOX_CAP_MODES
from grading.engine.sandbox.cgroups import TMPFS_MODES as SANDBOX_TMPFS_MODES
from shared.settings_env import Env, SettingError

BASE_DIR = Path(__file__).resolve().parent.parent
if "pytest" in sys.modules:
    # Each test process takes uids, ports, folders and a Redis database of its own, before any
    # variable is read, so parallel test processes and a second suite never meet (shared/pytest_slots.py).
    from shared import pytest_slots

    pytest_slots.enter(BASE_DIR / "var")

env = Env()

env.section("Files")
# why not under pytest: tests must not depend on a developer's .env (its port, its key); they set what they need.
env.read_env_file(
    "" if "pytest" in sys.modules else BASE_DIR / ".env", shown="`<checkout>/.env` (none under pytest)",
    doc="The file of NAME=value lines read first (make writes one for development); the environment wins "
        "over it. Empty: read none. Set it in the environment, not in the file.")

# The development key is public (it is in this file): it may only ever sign
# cookies on a developer's machine. Production mode refuses it below.
DEV_SECRET_KEY = "django-insecure-takehome-development-key-never-use-in-production"
# The keys make writes into a development .env (scripts/dotenv.py) start with this.
DEV_KEY_PREFIX = "django-insecure-takehome-dev-"

env.section("Django")
DEBUG = env.bool("DEBUG", False, doc="Development mode, on a developer's machine only; production (false) refuses "
                 "the development SECRET_KEY. The `.env` make writes sets true; docker compose forces false.")
env.debug = DEBUG  # the defaults that differ in development follow it

SECRET_KEY = env.secret(
    "SECRET_KEY", None, debug_default=DEV_SECRET_KEY, shown="none: required",
    debug_shown="a built-in development key",
    doc="Django's signing key: a long random string. `SECRET_KEY_FILE` names a file holding it instead "
        "(as Docker mounts secrets; the file wins).")
if not SECRET_KEY:
    raise SettingError(
        "SECRET_KEY is not set. Set SECRET_KEY (or SECRET_KEY_FILE) to a long random "
        "string, or set DEBUG=true on a development machine."
    )
if not DEBUG and (SECRET_KEY == DEV_SECRET_KEY or SECRET_KEY.startswith(DEV_KEY_PREFIX)):
    raise SettingError(
        "Refusing to start in production mode (DEBUG=false) with a development "
        "SECRET_KEY (the built-in one, or one make wrote into .env). Generate one with: "
        "python -c 'import secrets; print(secrets.token_urlsafe(50))'"
    )

ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", [], debug_default=["127.0.0.1", "localhost"],
                         doc="The host names the app answers to.")
# Candidate links are absolute: they go out by email and on the command line.
SITE_URL = env.url("SITE_URL", "http://127.0.0.1:8000", schemes=("http", "https"),
                   example="https://takehome.example.com",
                   doc="The site's address, used to build every link: candidates', set-password links, "
                       "the log-in line. `make run` sets it from `TAKEHOME_PORT`.").rstrip("/")
CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS", [SITE_URL], shown="`SITE_URL`",
                                doc="Origins allowed to post forms.")

env.section("Files")
# Everything the app writes lives under one folder: the SQLite file, the
# private Redis, uploads, the sandbox's runner virtualenv and scratch space.
VAR_DIR = env.path("TAKEHOME_VAR_DIR", BASE_DIR / "var", shown="`<checkout>/var`",
                   doc="Where the app writes: the SQLite file, the private Redis, uploads, the runner "
                       "virtualenv and scratch space.").resolve()
try:
    VAR_DIR.mkdir(parents=True, exist_ok=True)  # SQLite cannot create its own folder
except OSError:
    pass  # a read-only image: whatever needs the folder says so itself

INSTALLED_APPS = [
    # First, so its `manage.py runserver` (daphne's: the ASGI app, WebSockets too) wins over staticfiles' and
    # whitenoise's. why not "daphne" here, as daphne's docs have it: that app imports Twisted and Autobahn in
    # every process (about 0.7 s of CPU for each command, worker and server); shared's runserver imports
    # them only when it runs.
    "shared",
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
    "takehome",
    "sessions_app",
    "grading",
    # Above every app (.importlinter): the API, its tokens, and the webhooks the apps' signals send.
    "api",
    "ninja",
]

MIDDLEWARE = [
    # First: /healthz and /readyz are answered whatever the Host, over plain http, without login (shared/health.py).
    "shared.health.HealthMiddleware",
    # Next (the probes above leave no line), so that every line logged while a request is served carries
    # its id (shared/logs.py).
    "shared.logs.RequestIdMiddleware",
    "django.middleware.security.SecurityMiddleware",
    # Denies the browser features the site never uses (camera, microphone, location, payment, USB, ...).
    "shared.http.PermissionsPolicyMiddleware",
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

env.section("Database, broker and cache")
DATABASES = {
    "default": env.database_url("DATABASE_URL", f"sqlite:///{VAR_DIR / 'db.sqlite3'}",
                                shown="`sqlite:///<TAKEHOME_VAR_DIR>/db.sqlite3`",
                                doc="The database, e.g. `postgres://user:password@host:5432/takehome`."),
}
# How long a write waits for another request's lock before it gives up; the
# request then answers 503 with Retry-After (takehome/unavailable.py), never a 500.
# why well under gate.py's 30 s: the candidate must get that answer, not a timeout.
DB_BUSY_TIMEOUT_S = env.duration("TAKEHOME_DB_BUSY_TIMEOUT_S", 10.0, above=0,
                                 doc="How long a write waits for another's lock (SQLite's busy timeout, "
                                     "PostgreSQL's `lock_timeout`) before the request answers 503.")
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
if "pytest" in sys.modules and not DATABASES["default"]["ENGINE"].endswith("sqlite3"):
    # why the test slot in the name: pytest-django names a server's test databases test_<name>_gw<N>, the same
    # for two suites run beside each other against one server, which then dropped each other's; a slot is one
    # test process's alone on this machine (shared/pytest_slots.py).
    DATABASES["default"]["TEST"] = {
        "NAME": f"test_{DATABASES['default']['NAME']}_slot{pytest_slots.number()}"}
# Seconds a client is told to wait (Retry-After) when a write could not be done:
# BUSY when another write held the lock; FAULT when the disk is full or the
# database refuses writes or cannot be reached (an operator has to act).
RETRY_AFTER_BUSY_S = env.duration("TAKEHOME_RETRY_AFTER_BUSY_S", 5,
                                  doc="The `Retry-After` of a 503 because the database was busy.")
RETRY_AFTER_FAULT_S = env.duration("TAKEHOME_RETRY_AFTER_FAULT_S", 60,
                                   doc="The `Retry-After` of a 503 because the disk is full, or the database "
                                       "refuses writes or cannot be reached.")
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
# why axes first: it refuses a locked-out login before any password is checked. The password backend is
# Django's, refusing every password while TAKEHOME_PASSWORD_LOGIN is false (so no path, the login page, the
# admin's or a crafted POST, checks one then); the sign-on backend answers only the provider's callback.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "takehome.sso.backend.PasswordBackend",
    "takehome.sso.backend.SignOnBackend",
]
# Failed logins (django-axes): after LOGIN_FAILURE_LIMIT failures for one
# username from one address, that pair is refused for LOGIN_LOCKOUT_MINUTES,
# counted again from each attempt made while locked out. Another address, or
# another username from the same address, is not affected. A success clears the count.
env.section("Accounts")
AXES_FAILURE_LIMIT = env.int("TAKEHOME_LOGIN_FAILURE_LIMIT", 5, least=1,
                             doc="Failed logins for one username from one address before that pair is "
                                 "refused for `TAKEHOME_LOGIN_LOCKOUT_MINUTES`.")
LOGIN_LOCKOUT_MINUTES = env.duration("TAKEHOME_LOGIN_LOCKOUT_MINUTES", 15, unit="min", least=1,
                                     doc="How long a locked-out username and address are refused, counted "
                                         "again from each try made meanwhile.")
AXES_COOLOFF_TIME = timedelta(minutes=LOGIN_LOCKOUT_MINUTES)
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_VERBOSE = False  # why: otherwise every manage.py command starts with axes' banner
AXES_LOCKOUT_CALLABLE = "takehome.team.views.locked_out"
# An invited member's set-password link works this long (and once). Django's default is 3 days.
PASSWORD_RESET_TIMEOUT = env.duration(
    "TAKEHOME_SET_PASSWORD_LINK_DAYS", 3, unit="days",
    doc="How long a set-password link (a new member's invitation, or one sent from the Team page) works; "
        "it works once.") * 24 * 3600
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

# Single sign-on for staff through OpenID Connect (mozilla-django-oidc; takehome/sso/): the provider's
# verified email finds the account, and its roles come from a claim (ROLES_CLAIM and ROLE_MAP) or, without
# one, from the Team page. docs/security.md, "Single sign-on", says how to set it up.
env.section("Single sign-on")
OIDC_ISSUER = env.url("TAKEHOME_OIDC_ISSUER", "", schemes=("https", "http"),
                      example="https://login.example.com/realms/staff",
                      doc="The OpenID Connect provider's issuer (its `iss`); set, staff may sign in through it. "
                          "Its endpoints are read from `<issuer>/.well-known/openid-configuration` unless the "
                          "three endpoint variables below are set.").rstrip("/")
OIDC_CLIENT_ID = env.str("TAKEHOME_OIDC_CLIENT_ID", "", doc="The client id the provider gave this site.")
OIDC_CLIENT_SECRET = env.secret("TAKEHOME_OIDC_CLIENT_SECRET", "",
                                doc="The client's secret, never shown or logged. "
                                    "`TAKEHOME_OIDC_CLIENT_SECRET_FILE` names a file holding it instead.")
OIDC_PROVIDER_NAME = env.str("TAKEHOME_OIDC_PROVIDER_NAME", "single sign-on",
                             doc="The provider's name on the login page's button (\"Log in with ...\").")
_OIDC_ENDPOINTS = {
    "authorization": env.url("TAKEHOME_OIDC_AUTHORIZATION_URL", "", schemes=("https", "http"),
                             doc="The provider's authorization endpoint; with the token and JWKS endpoints, "
                                 "instead of discovery."),
    "token": env.url("TAKEHOME_OIDC_TOKEN_URL", "", schemes=("https", "http"),
                     doc="The provider's token endpoint (see `TAKEHOME_OIDC_AUTHORIZATION_URL`)."),
    "jwks": env.url("TAKEHOME_OIDC_JWKS_URL", "", schemes=("https", "http"),
                    doc="The provider's JWKS endpoint, the keys ID tokens are signed with "
                        "(see `TAKEHOME_OIDC_AUTHORIZATION_URL`)."),
    "userinfo": env.url("TAKEHOME_OIDC_USERINFO_URL", "", schemes=("https", "http"),
                        doc="The provider's userinfo endpoint, asked for claims beside the ID token's; optional "
                            "with the three above (discovery finds it otherwise)."),
    "end_session": env.url("TAKEHOME_OIDC_END_SESSION_URL", "", schemes=("https", "http"),
                           doc="Where logging out sends a signed-on person to end their provider session too; "
                               "optional with the three above (discovery finds it otherwise)."),
}
OIDC_ROLES_CLAIM = env.str("TAKEHOME_OIDC_ROLES_CLAIM", "",
                           doc="The claim whose values give a signed-on person their roles at each sign-in "
                               "(e.g. `groups`; a dotted name such as `realm_access.roles` reaches inside an "
                               "object); needs `TAKEHOME_OIDC_ROLE_MAP`. Empty: roles are given on the Team page.")
OIDC_ROLE_MAP_ITEMS = env.list("TAKEHOME_OIDC_ROLE_MAP", [],
                               doc="How the claim's values map to roles: `VALUE=ROLE` pairs, ROLE one of "
                                   "`recruiter`, `reviewer`, `team-admin`, e.g. "
                                   "`hiring=recruiter,engineers=reviewer,hiring-leads=team-admin`; a value may "
                                   "give several roles in several pairs; values not listed give none.")
OIDC_TRUST_EMAILS = env.bool("TAKEHOME_OIDC_TRUST_EMAILS", False,
                             doc="Count an email the provider sends without `email_verified` as verified (a "
                                 "company directory that never sends the claim, such as Microsoft Entra ID); "
                                 "`email_verified: false` is refused whatever this says.")
PASSWORD_LOGIN = env.bool("TAKEHOME_PASSWORD_LOGIN", True,
                          doc="Whether staff may log in with a username and password. `false` needs single "
                              "sign-on: the login page shows only its button and a password sent is refused "
                              "(`manage.py createuser` still makes accounts; they sign in through the provider).")

OIDC_ENABLED = bool(OIDC_ISSUER)
_oidc_given = [name for name, value in (
    ("TAKEHOME_OIDC_CLIENT_ID", OIDC_CLIENT_ID), ("TAKEHOME_OIDC_CLIENT_SECRET", OIDC_CLIENT_SECRET),
    ("TAKEHOME_OIDC_AUTHORIZATION_URL", _OIDC_ENDPOINTS["authorization"]),
    ("TAKEHOME_OIDC_TOKEN_URL", _OIDC_ENDPOINTS["token"]), ("TAKEHOME_OIDC_JWKS_URL", _OIDC_ENDPOINTS["jwks"]),
    ("TAKEHOME_OIDC_USERINFO_URL", _OIDC_ENDPOINTS["userinfo"]),
    ("TAKEHOME_OIDC_END_SESSION_URL", _OIDC_ENDPOINTS["end_session"]),
    ("TAKEHOME_OIDC_ROLES_CLAIM", OIDC_ROLES_CLAIM), ("TAKEHOME_OIDC_ROLE_MAP", OIDC_ROLE_MAP_ITEMS)) if value]
# why refuse half a configuration: a site that seems to offer sign-on but cannot, or that maps no roles
# where it was meant to, fails at the first staff login instead of at start.
if not OIDC_ENABLED and _oidc_given:
    raise SettingError(f"{_oidc_given[0]} is set but TAKEHOME_OIDC_ISSUER is not: name the provider's issuer "
                       "(e.g. https://login.example.com/realms/staff), or unset the TAKEHOME_OIDC_* variables.")
if not OIDC_ENABLED and not PASSWORD_LOGIN:
    raise SettingError("TAKEHOME_PASSWORD_LOGIN=false needs single sign-on, or nobody could log in: set "
                       "TAKEHOME_OIDC_ISSUER, TAKEHOME_OIDC_CLIENT_ID and TAKEHOME_OIDC_CLIENT_SECRET.")
if OIDC_ENABLED:
    for _name, _value in (("TAKEHOME_OIDC_CLIENT_ID", OIDC_CLIENT_ID),
                          ("TAKEHOME_OIDC_CLIENT_SECRET", OIDC_CLIENT_SECRET)):
        if not _value:
            raise SettingError(f"TAKEHOME_OIDC_ISSUER is set but {_name} is not: copy it from the client "
                               "registered for this site at the provider.")
    # why: an ID token's issuer must be the provider's, over TLS; plain http only for one on this machine.
    if OIDC_ISSUER.startswith("http://") and not DEBUG and \
            OIDC_ISSUER.split("://", 1)[1].split("/", 1)[0].split(":", 1)[0] not in ("127.0.0.1", "localhost"):
        raise SettingError(f"TAKEHOME_OIDC_ISSUER={OIDC_ISSUER} is plain http: an identity provider must be "
                           "reached over https (http only for one on this machine, 127.0.0.1 or localhost).")
    _required = {"authorization": "TAKEHOME_OIDC_AUTHORIZATION_URL", "token": "TAKEHOME_OIDC_TOKEN_URL",
                 "jwks": "TAKEHOME_OIDC_JWKS_URL"}
    _missing = [name for key, name in _required.items() if not _OIDC_ENDPOINTS[key]]
    if len(_missing) < len(_required) and _missing:
        raise SettingError(f"{_missing[0]} is not set while the other endpoints are: set "
                           f"{', '.join(_required.values())} together, or none of them to read them from the "
                           "issuer's discovery document.")
    if bool(OIDC_ROLES_CLAIM) != bool(OIDC_ROLE_MAP_ITEMS):
        _absent = "TAKEHOME_OIDC_ROLE_MAP" if OIDC_ROLES_CLAIM else "TAKEHOME_OIDC_ROLES_CLAIM"
        raise SettingError(f"{_absent} is not set: TAKEHOME_OIDC_ROLES_CLAIM and TAKEHOME_OIDC_ROLE_MAP go "
                           "together (the claim, and how its values map to roles), or neither, to give roles "
                           "on the Team page.")
# Claim value -> the roles it gives (takehome/team/actions.py's names).
OIDC_ROLE_MAP: dict[str, list[str]] = {}
for _item in OIDC_ROLE_MAP_ITEMS:
    _value, _, _role = _item.rpartition("=")
    if not _value.strip() or _role.strip() not in ("recruiter", "reviewer", "team-admin"):
        raise SettingError(f"TAKEHOME_OIDC_ROLE_MAP has {_item!r}: write VALUE=ROLE pairs, ROLE one of "
                           "recruiter, reviewer or team-admin, e.g. hiring=recruiter,engineers=reviewer.")
    OIDC_ROLE_MAP.setdefault(_value.strip(), []).append(_role.strip())
# Found by discovery when the three are not set (takehome/sso/provider.py); read only from there.
OIDC_ENDPOINTS = _OIDC_ENDPOINTS if all(_OIDC_ENDPOINTS[key] for key in ("authorization", "token", "jwks")) \
    else {}
# mozilla-django-oidc's own names. Its views and backend are ours (takehome/sso/), which read the endpoints
# from provider.py; these are what its code still reads itself.
OIDC_RP_CLIENT_ID = OIDC_CLIENT_ID
OIDC_RP_CLIENT_SECRET = OIDC_CLIENT_SECRET
OIDC_RP_SIGN_ALGO = "RS256"
OIDC_RP_SCOPES = "openid email profile"
OIDC_USE_PKCE = True
OIDC_STORE_ID_TOKEN = True  # sent back as the hint when logging out at the provider
OIDC_TIMEOUT = 10
OIDC_AUTHENTICATION_CALLBACK_URL = "sso-callback"

LANGUAGE_CODE = "en-us"
env.section("Django")
TIME_ZONE = env.str("TIME_ZONE", "UTC", doc="The time zone pages show times in, e.g. `Europe/Paris`.")
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
env.section("Files")
STATIC_ROOT = env.path("TAKEHOME_STATIC_ROOT", BASE_DIR / "staticfiles", shown="`<checkout>/staticfiles`",
                       doc="Where `collectstatic` puts the static files.")
MEDIA_ROOT = env.path("TAKEHOME_MEDIA_ROOT", VAR_DIR / "media", shown="`<TAKEHOME_VAR_DIR>/media`",
                      doc="Where uploads and hosted sessions' recordings are stored with "
                          "`TAKEHOME_STORAGE=filesystem`; with `s3`, only where an upload arrives before it goes "
                          "to the bucket.")
MEDIA_URL = "/media-not-served/"  # uploads are never served directly

# Uploads and recordings live in one storage every host reads and writes (shared/stored.py): this disk by
# default, or an S3-compatible bucket (MinIO, Garage, SeaweedFS, Amazon S3) through django-storages when the
# web server, the workers and the workspace hosts are different machines (docs/operations.md, "Several hosts").
env.section("Uploads and recordings")
STORAGE = env.choice("TAKEHOME_STORAGE", "filesystem", ("filesystem", "s3"),
                     doc="Where uploads and hosted sessions' recordings are kept: `filesystem`, under "
                         "`TAKEHOME_MEDIA_ROOT` on this machine; `s3`, in the S3-compatible bucket "
                         "`TAKEHOME_S3_BUCKET`, which every host of a site on several machines reaches.")
S3_BUCKET = env.str("TAKEHOME_S3_BUCKET", "", doc="The bucket, with `TAKEHOME_STORAGE=s3`; create it first.")
S3_ENDPOINT_URL = env.url("TAKEHOME_S3_ENDPOINT_URL", "", schemes=("http", "https"), example="http://minio:9000",
                          doc="The S3 server's address, e.g. `http://minio:9000`; empty: Amazon S3 itself.")
S3_REGION = env.str("TAKEHOME_S3_REGION", "", doc="The bucket's region, e.g. `us-east-1` (MinIO's default) or "
                    "`garage` (Garage's); empty: the S3 client's own default.")
S3_ACCESS_KEY_ID = env.str("TAKEHOME_S3_ACCESS_KEY_ID", "",
                           doc="The access key's id; empty, with the secret empty too: the S3 client's own "
                               "credentials (its `AWS_*` variables, a machine's role).")
S3_SECRET_ACCESS_KEY = env.secret("TAKEHOME_S3_SECRET_ACCESS_KEY", "",
                                  doc="The access key's secret, never shown or logged. "
                                      "`TAKEHOME_S3_SECRET_ACCESS_KEY_FILE` names a file holding it instead.")
if STORAGE == "s3":
    if not S3_BUCKET:
        raise SettingError("TAKEHOME_STORAGE=s3 needs TAKEHOME_S3_BUCKET: name the bucket that every host "
                           "shares (create it first), and set TAKEHOME_S3_ENDPOINT_URL unless it is on Amazon S3.")
    if bool(S3_ACCESS_KEY_ID) != bool(S3_SECRET_ACCESS_KEY):
        raise SettingError("TAKEHOME_S3_ACCESS_KEY_ID and TAKEHOME_S3_SECRET_ACCESS_KEY go together: set both, "
                           "or neither to use the S3 client's own credentials.")
    if importlib.util.find_spec("storages") is None or importlib.util.find_spec("boto3") is None:
        raise SettingError("TAKEHOME_STORAGE=s3 needs django-storages and boto3, which are not installed here: "
                           "pip install -r requirements.txt (it names django-storages[s3]).")
    from shared.stored import s3_storage

    _default_storage = s3_storage(bucket=S3_BUCKET, endpoint_url=S3_ENDPOINT_URL, region=S3_REGION,
                                  access_key=S3_ACCESS_KEY_ID, secret_key=S3_SECRET_ACCESS_KEY)
else:
    _default_storage = {"BACKEND": "shared.stored.FileSystemStorage"}
# The apps' static files, less what no page loads (shared/staticfinders.py), and the project's static/.
STATICFILES_FINDERS = ["django.contrib.staticfiles.finders.FileSystemFinder", "shared.staticfinders.AppDirectoriesFinder"]
# why source maps are not compressed: only a browser's developer tools read them, and compressing them
# (several MB, most of them the API reference's) took half of collectstatic's time
WHITENOISE_SKIP_COMPRESS_EXTENSIONS = (*Compressor.SKIP_COMPRESS_EXTENSIONS, "map")
STORAGES = {
    "default": _default_storage,
    "staticfiles": {
        "BACKEND": (
            "django.contrib.staticfiles.storage.StaticFilesStorage"
            if DEBUG
            else "whitenoise.storage.CompressedManifestStaticFilesStorage"
        )
    },
}

env.section("Django")
EMAIL_CONFIG = env.email_url("EMAIL_URL", "consolemail://",
                             doc="How email goes out; `consolemail://` prints it. For SMTP: "
                                 "`smtp+tls://user:password@smtp.example.com:587`.")
globals().update(EMAIL_CONFIG)
DEFAULT_FROM_EMAIL = env.str("DEFAULT_FROM_EMAIL", "takehome <takehome@localhost>",
                             doc="The sender of the emails the app sends.")

# Production hardening: on whenever DEBUG is off, so `check --deploy` is clean.
# TLS ends at the proxy in front (Caddy in docker-compose.yml), which tells us the
# client's scheme in X-Forwarded-Proto. why trusting it is sound: the proxy sets the
# header itself, replacing the client's (Caddy does; docs/install.md says what another
# proxy must do), and daphne is reachable only through the proxy.
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_SSL_REDIRECT = env.bool("SECURE_SSL_REDIRECT", True, debug_default=False,
                               doc="Redirect http to https; set false when a proxy in front already does.")
SESSION_COOKIE_SECURE = not DEBUG
CSRF_COOKIE_SECURE = not DEBUG
SECURE_HSTS_SECONDS = env.duration("SECURE_HSTS_SECONDS", 31536000, debug_default=0,
                                  doc="How long browsers must keep to https (HSTS); 0 sends no header.")
SECURE_HSTS_INCLUDE_SUBDOMAINS = not DEBUG
SECURE_HSTS_PRELOAD = env.bool("SECURE_HSTS_PRELOAD", False,
                               doc="Ask to be on browsers' HSTS preload list.")
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



def sign_on_form_action(policy: dict, issuer: str, end_session: str) -> dict:
    """The policy with the provider's origins added to form-action. why: logging out is a form POST that a
    signed-on person's browser follows on to the provider's end-session endpoint, and Chromium holds every
    redirect of a form's navigation to form-action."""
    origins = []
    for url in (issuer, end_session):
        if url:
            parts = url.split("/", 3)
            origins.append("/".join(parts[:3]))
    directives = dict(policy["DIRECTIVES"])
    directives["form-action"] = [*directives["form-action"], *dict.fromkeys(origins)]
    return {**policy, "DIRECTIVES": directives}


if OIDC_ENABLED:
    CONTENT_SECURITY_POLICY = sign_on_form_action(CONTENT_SECURITY_POLICY, OIDC_ISSUER,
                                                  _OIDC_ENDPOINTS["end_session"])

if not DEBUG and not SECURE_HSTS_PRELOAD:
    SILENCED_SYSTEM_CHECKS = ["security.W021"]  # preload is a choice, not a default

# Celery. The broker is Redis everywhere: by default a private redis-server
# that `make run` starts on a unix socket under VAR_DIR.
REDIS_SOCKET = VAR_DIR / "redis" / "redis.sock"
env.section("Database, broker and cache")
CELERY_BROKER_URL = env.url("CELERY_BROKER_URL", f"redis+socket://{REDIS_SOCKET}",
                            shown="`redis+socket://<TAKEHOME_VAR_DIR>/redis/redis.sock` (make run starts it)",
                            example="redis://redis:6379/0",
                            doc="Celery's broker, a Redis, e.g. `redis://redis:6379/0`.")
# Channels' layer (the hosted terminal: closing every socket of an invitation) lives on the
# same Redis as the broker. TAKEHOME_CHANNEL_LAYER=memory keeps it in the process instead:
# only for tests and a single daphne process.
def _redis_for_channels(broker: str) -> str:
    if broker.startswith("redis+socket://"):
        return "unix://" + broker.removeprefix("redis+socket://")
    return broker


if env.choice("TAKEHOME_CHANNEL_LAYER", "redis", ("redis", "memory"),
              doc="Where Channels' layer (closing every terminal of an invitation) lives: `redis`, the "
                  "broker's; `memory`, in the one process (tests only).") == "memory":
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels_redis.core.RedisChannelLayer",
                                  # why socket_timeout: redis-py 8 reads with a 5 s timeout by default,
                                  # and channels_redis waits 5 s for a message (BZPOPMIN): the read timed
                                  # out and closed every idle terminal after a few seconds.
                                  "CONFIG": {"hosts": [{"address": _redis_for_channels(CELERY_BROKER_URL),
                                                        "socket_timeout": 30}],
                                             "prefix": "takehome-channels"}}}
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
env.section("Grading")
GRADING_TIME_LIMIT_S = env.duration("TAKEHOME_GRADING_TIME_LIMIT_S", 600,
                                    doc="Hard time limit of one grading task.")
# Sending a grading message from a request gives up after this many seconds
# (connect, and each reply), without retrying, when the broker is down or
# stalls: the upload is already stored, and the sweep sends the message later.
# The worker's own connection keeps the defaults (shared/publish.py says why).
env.section("Database, broker and cache")
BROKER_SEND_TIMEOUT_S = env.duration("TAKEHOME_BROKER_SEND_TIMEOUT_S", 1.0,
                                     doc="Sending a grading message from a request gives up after this long "
                                         "(connect, and each reply), without retrying; the sweep sends it later.")
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "visibility_timeout": max(3600, 2 * (GRADING_TIME_LIMIT_S + 60)),
}
CELERY_TIMEZONE = TIME_ZONE
CELERY_BEAT_SCHEDULE_FILENAME = str(VAR_DIR / "celerybeat-schedule")
# A worker reports in (shared.tasks.record_heartbeat) when beat asks, three times per interval, so one late
# report never makes /readyz say that no worker is alive; a report not taken within the interval is dropped
# (expires), so a worker back from an outage does not work through a pile of them.
env.section("Health")
WORKER_HEARTBEAT_S = env.duration("TAKEHOME_WORKER_HEARTBEAT_S", 30, least=3,
                                  doc="A worker counts as alive (`/readyz`, `manage.py health`) when it reported "
                                      "in within this long; beat asks for a report three times as often.")
CELERY_BEAT_SCHEDULE = {
    "record-heartbeat": {"task": "shared.tasks.record_heartbeat", "schedule": WORKER_HEARTBEAT_S / 3,
                         "options": {"expires": WORKER_HEARTBEAT_S}},
    "sweep-submissions": {"task": "grading.tasks.sweep_submissions", "schedule": 60.0},
    "sweep-packet-checks": {"task": "takehome.tasks.sweep_packet_checks", "schedule": 60.0},
    "send-reminders": {"task": "takehome.tasks.send_reminders", "schedule": 300.0},
    "forget-kept-uploads": {"task": "takehome.tasks.forget_kept_uploads", "schedule": 3600.0},
    "sweep-webhooks": {"task": "api.tasks.sweep_webhooks", "schedule": 60.0},
}

# Each readiness check (shared/health.py) gives up after HEALTH_TIMEOUT_S, so a probe polled every few seconds
# never hangs on a database or broker that is down or stalled.
HEALTH_TIMEOUT_S = env.duration("TAKEHOME_HEALTH_TIMEOUT_S", 2.0, above=0,
                                doc="Each readiness check (the database, the broker, the S3 bucket, the workspace "
                                    "host) gives up after this long and counts as failing; PostgreSQL waits at "
                                    "least 2 s.")
HEALTH_WORKSPACES = env.choice("TAKEHOME_HEALTH_WORKSPACES", "auto", ("auto", "yes", "no"),
                               doc="Whether readiness asks this host's `serve_workspaces`: `auto` once a packet "
                                   "version offers a hosted workspace, `yes` always, `no` never (a host that "
                                   "serves no workspaces).")

env.section("Logs and metrics")
LOG_LEVEL = env.choice("LOG_LEVEL", "INFO", ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"),
                       doc="The least severe log messages printed (by the Celery worker and beat too: their "
                           "`--loglevel` is not used).")
LOG_FORMAT = env.choice("TAKEHOME_LOG_FORMAT", "text", ("text", "json"),
                        doc="How log lines are written: `text`, for people; `json`, one JSON object a line "
                            "(time, level, logger, message, request_id or task_id) for a log collector.")
# Every line goes through the root's one handler, to standard error: time, level, logger, message and the
# request or task id it was written for (shared/logs.py). The Celery worker and beat keep this too
# (takehome/celery.py answers their setup_logging signal).
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {
        "context": {"()": "shared.logs.LogContext"},
        "client_errors": {"()": "shared.logs.NoTracebackForClientErrors"},
        "quiet_heartbeat": {"()": "shared.logs.QuietHeartbeat"},
    },
    "formatters": {
        "text": {"()": "shared.logs.ReadableFormatter"},
        "json": {"()": "shared.logs.JsonFormatter"},
    },
    "handlers": {"console": {"class": "logging.StreamHandler", "filters": ["context", "client_errors", "quiet_heartbeat"],
                             "formatter": LOG_FORMAT}},
    "root": {"handlers": ["console"], "level": LOG_LEVEL},
    # why: in DEBUG, Django's own "django" logger has a console handler too, so a
    # 403 or 404 printed its traceback twice; everything goes through the root's.
    "loggers": {"django": {"handlers": [], "propagate": True}},
}
# /metrics (grading/metrics.py) answers only a request bearing this token; without one it is a 404.
METRICS_TOKEN = env.secret("TAKEHOME_METRICS_TOKEN", "",
                           doc="The bearer token Prometheus sends to `/metrics` (`Authorization: Bearer ...`); at "
                               "least 16 characters. `TAKEHOME_METRICS_TOKEN_FILE` names a file holding it instead. "
                               "Empty: `/metrics` answers 404.")
# why a floor: the endpoint faces the internet behind the proxy; a short token could be guessed.
if METRICS_TOKEN and len(METRICS_TOKEN) < 16:
    raise SettingError("TAKEHOME_METRICS_TOKEN is shorter than 16 characters. Make one with: "
                       "python -c 'import secrets; print(secrets.token_urlsafe(32))'")

# Grading. The sandbox runs candidate code as unprivileged uids, so the runner
# virtualenv and the scratch folder must sit where any user can traverse.
# Under VAR_DIR when every folder above it lets other users through, else
# under /var/tmp/takehome-<hash> (see grading.engine.runner.sandbox_home).
SANDBOX_HOME = sandbox_home(VAR_DIR)
env.section("Grading")
_UNDER_SANDBOX_HOME = "`<TAKEHOME_VAR_DIR>/{0}`, or `/var/tmp/takehome-<hash>/{0}` when a folder above it is private"
GRADING_RUNNER_DIR = env.path("TAKEHOME_RUNNER_DIR", SANDBOX_HOME / "runner",
                              shown=_UNDER_SANDBOX_HOME.format("runner"),
                              doc="The sandbox's runner virtualenv (pinned pytest); every folder above it must "
                                  "let other users through.")
GRADING_SCRATCH_DIR = env.path("TAKEHOME_SCRATCH_DIR", SANDBOX_HOME / "scratch",
                               shown=_UNDER_SANDBOX_HOME.format("scratch"),
                               doc="Scratch space for sandboxed runs; every folder above it must let other "
                                   "users through.")
# Packets that need more than pytest (a requirements.txt, another Python) run in
# a virtualenv of their own, built once per (Python, requirements) under
# RUNNERS_DIR (grading/engine/runner.py); PYTHONS lists the interpreters a packet may
# choose from, the first being the default; PIP_INDEX_URL, when set, is the
# package index those builds use (else pip's own configuration decides).
GRADING_RUNNERS_DIR = env.path("TAKEHOME_RUNNERS_DIR", SANDBOX_HOME / "runners",
                               shown=_UNDER_SANDBOX_HOME.format("runners"),
                               doc="Virtualenvs of packets that declare a requirements.txt or another Python, "
                                   "one per (Python, requirements), built once and shared; each starts as a copy "
                                   "of a bare venv of its Python kept there (.seed-*).")
GRADING_PYTHONS = env.list("TAKEHOME_PYTHONS", ["/usr/bin/python3"],
                           doc="The interpreters a packet may choose from, the first the default; each must be "
                               "executable by other users and have the venv module.")
GRADING_PIP_INDEX_URL = env.str("TAKEHOME_PIP_INDEX_URL", "",
                                doc="The package index packets' environments are built from (pip's "
                                    "`--index-url`, e.g. a company mirror); empty: pip's own configuration.")
env.section("The sandbox")
GRADING_UID_BASE = env.int("TAKEHOME_SANDBOX_UID_BASE", 62000,
                           doc="The first uid of the sandbox's pool, one uid per run or warm sandbox.")
# why 16: each worker process keeps TAKEHOME_WARM_SANDBOXES pre-started sandboxes,
# each holding a uid while it waits, beside its cold runs (the hidden tests' two).
GRADING_SANDBOX_SLOTS = env.int("TAKEHOME_SANDBOX_SLOTS", 16,
                                doc="How many sandboxes may exist at once (uids from the base); keep at least "
                                    "workers x (`TAKEHOME_WARM_SANDBOXES` + 2).")
# How they work: grading/engine/sandbox/__init__.py, "warm sandboxes".
GRADING_WARM_SANDBOXES = env.int("TAKEHOME_WARM_SANDBOXES", 6,
                                 doc="Sandboxes kept ready per worker process, pytest imported, each for one "
                                     "run; 0: every run starts cold.")
GRADING_WARM_IDLE_S = env.duration("TAKEHOME_WARM_IDLE_S", 300, least=1,
                                   doc="A warm sandbox that waited this long, once ready, is ended and its uid freed.")
GRADING_RUN_WALL_S = env.duration("TAKEHOME_RUN_WALL_S", 60, doc="Wall-clock limit of one sandboxed test run.")
# Each call of the packet's hidden tests into the candidate's code (docs/evidence.md): an honest call
# takes milliseconds; one that sleeps to signal what it was given fails its test.
GRADING_CALL_LIMIT_S = env.duration("TAKEHOME_GRADING_CALL_LIMIT_S", 2.0, above=0,
                                    doc="Time limit of each call of a packet's hidden tests into the "
                                        "candidate's code.")
# Caps on each sandboxed run as a whole (grading/engine/sandbox/cgroups.py): the memory of all
# its processes together, its processes, and files per tmpfs (/tree, /tmp,
# /dev/shm). TAKEHOME_SANDBOX_CAPS picks how: auto (the strongest that works
# here), cgroup2, cgroup1, or rlimit (per-process limits, at most
# FALLBACK_PROCESSES processes sharing MEMORY_MB); TAKEHOME_SANDBOX_TMPFS: auto,
# mount (per-run tmpfs mounts with an inode cap; needs root) or bwrap (no inode cap).
# why at least 3 processes: bubblewrap, its shell and pytest are three processes of the run's uid.
GRADING_SANDBOX_MEMORY_MB = env.int("TAKEHOME_SANDBOX_MEMORY_MB", 1024, unit="MB", least=64,
                                    doc="Memory of all of one sandboxed run's processes together.")
GRADING_SANDBOX_PROCESSES = env.int("TAKEHOME_SANDBOX_PROCESSES", 64, least=3, doc="Processes of one run.")
GRADING_SANDBOX_TMPFS_INODES = env.int("TAKEHOME_SANDBOX_TMPFS_INODES", 16384, least=64,
                                       doc="Files and folders in each of a run's tmpfs mounts (`/tree`, `/tmp`, "
                                           "`/dev/shm`).")
GRADING_SANDBOX_FALLBACK_PROCESSES = env.int("TAKEHOME_SANDBOX_FALLBACK_PROCESSES", 8, least=3,
                                             doc="Under `rlimit` caps: processes per run, each with "
                                                 "`TAKEHOME_SANDBOX_MEMORY_MB` / this much address space.")
GRADING_SANDBOX_CAPS = env.choice("TAKEHOME_SANDBOX_CAPS", "auto", SANDBOX_CAP_MODES,
                                  doc="How memory and processes are capped: `auto` (the strongest that works "
                                      "here), or one forced; a forced mode that does not work stops grading "
                                      "with the reason.")
GRADING_SANDBOX_TMPFS = env.choice("TAKEHOME_SANDBOX_TMPFS", "auto", SANDBOX_TMPFS_MODES,
                                   doc="How the inode cap is set: `mount` (a tmpfs per run, mounted by the "
                                       "worker as root) or `bwrap` (bubblewrap's own tmpfs: no inode cap).")
# Hosted sessions (step 10): one sandboxed workspace per invitation under
# WORKSPACES_DIR, each shell under its own uid from UID_BASE + [0, SLOTS) (kept
# apart from the grading uids), with its own caps: DISK_MB of files, MEMORY_MB
# for all its processes, PROCESSES, CPUS cores. A shell idle IDLE_MINUTES is
# stopped and its files saved (`manage.py serve_workspaces` sweeps); the next
# visit starts it again.
env.section("Hosted sessions")
# Whether this process's server holds workspaces at all. docker-compose.yml's web server does not: it runs
# unprivileged, and the proxy sends the workspaces' paths (sessions_app/hosted/paths.py) to the workspace
# host (`manage.py serve_workspaces --http`), which holds them.
HOLDS_WORKSPACES = env.bool("TAKEHOME_HOLDS_WORKSPACES", True,
                            doc="Whether this server holds hosted workspaces (mounts their files, starts their "
                                "shells). `false` for a web server behind a proxy that sends the workspaces' "
                                "paths to a workspace host (`manage.py serve_workspaces --http`), as "
                                "docker-compose.yml's does: such a request reaching it is refused with a "
                                "sentence, and nothing is mounted.")
WORKSPACES_DIR = env.path("TAKEHOME_WORKSPACES_DIR", VAR_DIR / "workspaces",
                          shown="`<TAKEHOME_VAR_DIR>/workspaces`", doc="Where each invitation's workspace lives (`inv-<id>/`).")
# Which server holds a workspace: its files and shell live on one host only (see docs/operations.md,
# "More hosts"); each host serves and sweeps its own workspaces.
WORKSPACE_HOST = env.str("TAKEHOME_WORKSPACE_HOST", socket.gethostname(), shown="this machine's host name",
                         doc="The name of this server for the workspaces it holds; each host serves and sweeps "
                             "only its own, so route every `/t/<token>/` request of an invitation to one host.")
WORKSPACE_UID_BASE = env.int("TAKEHOME_WORKSPACE_UID_BASE", 63000,
                             doc="The first uid of the workspaces' shells, one per open workspace; the range may "
                                 "not overlap the grading sandbox's.")
WORKSPACE_SLOTS = env.int("TAKEHOME_WORKSPACE_SLOTS", 500, least=1, doc="Open workspaces at most.")
WORKSPACE_DISK_MB = env.int("TAKEHOME_WORKSPACE_DISK_MB", 64, unit="MB", least=1,
                            doc="The files a workspace may hold.")
WORKSPACE_MEMORY_MB = env.int("TAKEHOME_WORKSPACE_MEMORY_MB", 512, unit="MB", least=64,
                              doc="Memory of all of a workspace's processes together.")
WORKSPACE_PROCESSES = env.int("TAKEHOME_WORKSPACE_PROCESSES", 128, least=8, doc="Processes of one workspace.")
WORKSPACE_CPUS = env.float("TAKEHOME_WORKSPACE_CPUS", 1.0, above=0, doc="CPU cores of one workspace.")
RECORDING_MAX_BYTES = env.int("TAKEHOME_RECORDING_MAX_MB", 20, unit="MB",
                              doc="The hosted terminal's recording stops recording past this size, "
                                  "and says so.") * 1024 * 1024
WORKSPACE_IDLE_MINUTES = env.duration("TAKEHOME_WORKSPACE_IDLE_MINUTES", 30, unit="min", least=1,
                                      doc="A shell unused this long is stopped and its files saved; the next "
                                          "visit starts it again.")
_ws_uids, _grading_uids = (range(WORKSPACE_UID_BASE, WORKSPACE_UID_BASE + WORKSPACE_SLOTS),
                           range(GRADING_UID_BASE, GRADING_UID_BASE + GRADING_SANDBOX_SLOTS))
if _ws_uids.start < _grading_uids.stop and _grading_uids.start < _ws_uids.stop:
    raise SettingError("TAKEHOME_WORKSPACE_UID_BASE and SLOTS overlap the grading sandbox's uids "
                       "(TAKEHOME_SANDBOX_UID_BASE): give workspaces a range of their own.")
env.section("Grading")
GRADING_STALE_RECEIVED_S = env.duration("TAKEHOME_STALE_RECEIVED_S", 30,
                                        doc="The sweep sends grading for an upload whose message was never "
                                            "sent after this long (one the broker did not take: at its next pass).")
GRADING_STALE_QUEUED_S = env.duration("TAKEHOME_STALE_QUEUED_S", 600,
                                      doc="The sweep sends grading again for an upload whose message was sent "
                                          "this long ago (each send restarts the clock) once no grading has run "
                                          "for as long either; sooner when a message sent after it has started.")
GRADING_HEARTBEAT_S = env.duration("TAKEHOME_GRADING_HEARTBEAT_S", 15,
                                   doc="While grading, the worker's process notes it is alive this often.")
GRADING_LOST_AFTER_S = env.duration("TAKEHOME_GRADING_LOST_AFTER_S", 3 * GRADING_HEARTBEAT_S,
                                    shown="3 heartbeats (`45`)",
                                    doc="A run whose heartbeat is older than this has lost its worker, and the "
                                        "sweep sends the upload again.")
if not 0 < GRADING_HEARTBEAT_S < GRADING_LOST_AFTER_S:
    raise SettingError(
        f"TAKEHOME_GRADING_HEARTBEAT_S={GRADING_HEARTBEAT_S} must be at least 1 and below "
        f"TAKEHOME_GRADING_LOST_AFTER_S={GRADING_LOST_AFTER_S} (3 heartbeats is a good margin).")
GRADING_MIN_RED_TO_GREEN_S = env.duration("TAKEHOME_MIN_RED_TO_GREEN_S", 20,
                                          doc="Gate receipts from red to green closer than this are named on "
                                              "the review page: no time to ask a model and apply a fix.")

env.section("Database, broker and cache")
CACHES = {"default": env.cache_url("CACHE_URL", "locmemcache://",
                                   doc="The cache the per-address limit on link look-ups counts in; "
                                       "`locmemcache://` is per process, so give several web processes one, "
                                       "e.g. `redis://redis:6379/1`.")}

# The candidate's side.
# Look-ups of unknown or revoked links per client address per minute; past it,
# every link look-up from that address gets 429 for the rest of the minute.
# Requests on a valid link never count (they have per-invitation limits), so
# forty candidates behind one office address are never refused.
# why: tokens are unguessable, but nobody gets to try millions of them either.
env.section("Candidates")
TOKEN_LOOKUPS_PER_MINUTE = env.int("TAKEHOME_TOKEN_LOOKUPS_PER_MINUTE", 240,
                                   doc="Look-ups of unknown or revoked links per client address per minute; "
                                       "past it, that address gets 429 on every link until the minute ends. "
                                       "Requests on valid links never count.")
# Largest upload accepted, in bytes, checked from Content-Length and again while streaming.
UPLOAD_MAX_BYTES = env.int("TAKEHOME_UPLOAD_MAX_BYTES", 20 * 1024 * 1024, unit="bytes", least=1,
                           doc="The largest upload, the zip as sent.")
# What one upload may unpack to, checked by the grader on inflated bytes (virtualenvs, .git and
# caches are left out first and do not count): files, bytes per file, bytes in all. Past any,
# the upload is not accepted and the candidate's page says which limit and by what.
UPLOAD_MAX_FILES = env.int("TAKEHOME_UPLOAD_MAX_FILES", 2000, least=1,
                           doc="Files one upload may unpack to (virtualenvs, `.git` and caches left out first); "
                               "past it, or either limit below, the upload is not accepted.")
UPLOAD_MAX_FILE_BYTES = env.int("TAKEHOME_UPLOAD_MAX_FILE_BYTES", 10 * 1024 * 1024, unit="bytes", least=1,
                                doc="Bytes one unpacked file may hold.")
UPLOAD_MAX_UNPACKED_BYTES = env.int("TAKEHOME_UPLOAD_MAX_UNPACKED_BYTES", 50 * 1024 * 1024, unit="bytes",
                                    least=1, doc="Bytes one upload may unpack to in all.")
UPLOAD_GRACE_S = env.duration("TAKEHOME_UPLOAD_GRACE_S", 300,
                              doc="Uploads and gate steps are still accepted this long after the deadline.")
# why the request's start: shared/request_start.py stamps it before the body arrives.
UPLOAD_IN_FLIGHT_S = env.duration("TAKEHOME_UPLOAD_IN_FLIGHT_S", 120,
                                  doc="An upload whose request began before uploads closed is still taken if "
                                      "its body has arrived this long after they closed (a slow line).")
# Past either limit, 429 with a message the candidate can act on.
UPLOAD_INTERVAL_S = env.duration("TAKEHOME_UPLOAD_INTERVAL_S", 10,
                                 doc="Per invitation, at most one upload this often; 0: no limit.")
UPLOAD_MAX_COUNT = env.int("TAKEHOME_UPLOAD_MAX_COUNT", 30, doc="Per invitation, at most this many uploads; "
                           "0: no limit.")
# The model window (sessions_app/model_window/window.py): an OpenAI-compatible chat API the
# candidate reaches through /t/<token>/model/v1 once a red run is witnessed. The
# base URL ends before /chat/completions, e.g. http://127.0.0.1:11434/v1 for Ollama;
# empty: no model is provided, and candidates use their own. The key (or the file
# holding it) is sent to that URL only, never shown or logged.
env.section("The model window")
MODEL_URL = env.url("TAKEHOME_MODEL_URL", "", schemes=("http", "https"), example="http://127.0.0.1:11434/v1",
                    doc="The base URL of an OpenAI-compatible chat API candidates reach once a red run is "
                        "witnessed, up to `/chat/completions`; empty: no model is provided.").rstrip("/")
MODEL_NAME = env.str("TAKEHOME_MODEL_NAME", "", doc="The model asked for; required with `TAKEHOME_MODEL_URL`. "
                     "A packet's own model name overrides it.")
MODEL_KEY = env.secret("TAKEHOME_MODEL_KEY", "",
                       doc="The upstream's API key, sent as a Bearer token to `TAKEHOME_MODEL_URL` only; never "
                           "shown, stored or logged. Empty: no Authorization header.")
MODEL_TIMEOUT_S = env.duration("TAKEHOME_MODEL_TIMEOUT_S", 60.0,
                               doc="How long the upstream may take to answer, or between two streamed chunks.")
# Caps per invitation (requests, tokens in and out) and per request (body bytes, max_tokens asked for).
MODEL_MAX_REQUESTS = env.int("TAKEHOME_MODEL_MAX_REQUESTS", 100, doc="Requests per invitation.")
MODEL_MAX_TOKENS = env.int("TAKEHOME_MODEL_MAX_TOKENS", 60_000,
                           doc="Tokens per invitation, in and out together.")
MODEL_MAX_REQUEST_BYTES = env.int("TAKEHOME_MODEL_MAX_REQUEST_BYTES", 64 * 1024, unit="bytes",
                                  doc="The body of one request; past it, 413.")
MODEL_MAX_REPLY_TOKENS = env.int("TAKEHOME_MODEL_MAX_REPLY_TOKENS", 4096,
                                 doc="The `max_tokens` passed on with one request.")
if MODEL_URL and not MODEL_NAME:
    raise SettingError("TAKEHOME_MODEL_URL is set but TAKEHOME_MODEL_NAME is not: name the model to ask.")
# The API (api/endpoints.py) and the webhooks (api/delivery.py).
env.section("API and webhooks")
API_REQUESTS_PER_MINUTE = env.int("TAKEHOME_API_REQUESTS_PER_MINUTE", 120,
                                  doc="Requests one API token may make per minute (counted in `CACHE_URL`'s cache); "
                                      "past it, 429 with Retry-After until the minute ends. 0: no limit.")
WEBHOOK_TIMEOUT_S = env.duration("TAKEHOME_WEBHOOK_TIMEOUT_S", 10.0, above=0,
                                 doc="How long a webhook's endpoint may take to connect and answer; past it, "
                                     "the attempt failed and is tried again later.")
WEBHOOK_MAX_RETRIES = env.int("TAKEHOME_WEBHOOK_MAX_RETRIES", 8,
                              doc="Tries of a webhook after its first, each after a doubling wait with jitter "
                                  "(Celery's retry_backoff, from 10 s up to 10 min); then it is logged as failed.")
# why off by default: the server posts wherever an endpoint says; see api/signing.py.check_address.
WEBHOOK_ALLOW_PRIVATE = env.bool("TAKEHOME_WEBHOOK_ALLOW_PRIVATE", False,
                                 doc="Let webhook endpoints be on this machine or a private network (loopback, "
                                     "10/8, 172.16/12, 192.168/16, link-local...). Off: such addresses, and "
                                     "`SITE_URL`'s host, are refused when registered and again when sent to.")

# Form fields other than files (and a gate receipt's JSON body) may hold this much.
DATA_UPLOAD_MAX_MEMORY_SIZE = 4 * 1024 * 1024
DATA_UPLOAD_MAX_NUMBER_FILES = 5
# Uploads on other pages (a recruiter's packet zips) go to disk past 1 MB.
FILE_UPLOAD_MAX_MEMORY_SIZE = 1024 * 1024

# Read by other programs, declared here so that the docs and .env.example list every knob.
env.section("Read by other programs")
env.elsewhere("TAKEHOME_PORT", "int", 8000, read_by="`make run`", shown="`8000`, or the one in `.env`",
              doc="The port of `make run`'s web server on 127.0.0.1 (`make run PORT=8123` sets it).")
env.elsewhere("TAKEHOME_WORKER_CONCURRENCY", "int", 2, read_by="`make run`",
              doc="Processes in `make run`'s worker.")
env.elsewhere("TAKEHOME_HOST", "str", "localhost", read_by="docker compose (for Caddy)",
              doc="The site's host name: a real name whose DNS points here gets a public certificate, "
                  "`localhost` one from Caddy's internal CA. Set `ALLOWED_HOSTS` and `SITE_URL` to match.")
env.elsewhere("TAKEHOME_WORKSPACE_UPSTREAMS", "str", "workspaces:8000", read_by="docker compose (for Caddy)",
              doc="The workspace hosts' addresses, separated by spaces: Caddy sends every request of one "
                  "invitation's workspace to the same one of them, picked by a hash of its token "
                  "(docs/operations.md, \"More hosts\").")
