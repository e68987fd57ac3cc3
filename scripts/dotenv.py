#!/usr/bin/env python3
"""The checkout's .env: written once by `make` for development, read by the settings.

    scripts/dotenv.py write [PATH]   write PATH (default ./.env) unless it exists
    scripts/dotenv.py get NAME [DEFAULT]   print NAME's value in ./.env (or TAKEHOME_ENV_FILE), or DEFAULT

`write` takes the port from TAKEHOME_PORT (default 8000), SITE_URL from
SITE_URL (default http://127.0.0.1:<port>) and the var folder from
TAKEHOME_VAR_DIR (default ./var). An existing file is never touched.
Standard library only: it runs before the virtualenv exists.
"""

from __future__ import annotations

import os
import secrets
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Must match takehome/settings.py: production (DEBUG=false) refuses any key
# with this prefix, so a development .env can never sign production cookies.
DEV_KEY_PREFIX = "django-insecure-takehome-dev-"


def dev_env_text(port: int, site_url: str, var_dir: str) -> str:
    """The lines of a development .env."""
    return (
        "# Written by `make` for development on this machine; never used in production\n"
        "# (a DEBUG=false start refuses this SECRET_KEY). Edit freely; make never rewrites it.\n"
        "# Variables set in the environment win over this file. Every setting: .env.example.\n"
        "DEBUG=true\n"
        f"SECRET_KEY={DEV_KEY_PREFIX}{secrets.token_urlsafe(40)}\n"
        f"TAKEHOME_PORT={port}\n"
        f"SITE_URL={site_url}\n"
        f"TAKEHOME_VAR_DIR={var_dir}\n"
    )


def write_dev_env(path: Path, environ=os.environ) -> bool:
    """Write a development .env at `path` unless one exists; True when written."""
    if path.exists():
        return False
    port = environ.get("TAKEHOME_PORT") or "8000"
    if not port.isdigit() or not 1 <= int(port) <= 65535:
        raise SystemExit(f"TAKEHOME_PORT={port} is not a port number (1 to 65535).")
    site_url = environ.get("SITE_URL") or f"http://127.0.0.1:{port}"
    var_dir = environ.get("TAKEHOME_VAR_DIR") or str(path.parent / "var")
    # why O_EXCL and 0600: the file holds a secret, and two makes at once must not both write it.
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(dev_env_text(int(port), site_url.rstrip("/"), var_dir))
    return True


def read_env_file(path: Path) -> dict[str, str]:
    """NAME=value lines (comments, blank lines and an `export ` prefix allowed; quotes stripped)."""
    values = {}
    if not path.is_file():
        return values
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        name, value = line.removeprefix("export ").split("=", 1)
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        values[name.strip()] = value
    return values


def main(argv: list[str]) -> int:
    if argv[:1] == ["write"] and len(argv) <= 2:
        path = Path(argv[1]) if len(argv) == 2 else ROOT / ".env"
        if write_dev_env(path):
            print(f"Wrote {path} for development (DEBUG=true, a generated SECRET_KEY, "
                  f"SITE_URL for port {os.environ.get('TAKEHOME_PORT') or 8000}); edit it to change them.")
        return 0
    if argv[:1] == ["get"] and len(argv) in (2, 3):
        # As the settings do: TAKEHOME_ENV_FILE names another file, or none when empty.
        name = os.environ.get("TAKEHOME_ENV_FILE", str(ROOT / ".env"))
        value = read_env_file(Path(name)).get(argv[1]) if name else None
        print(value if value is not None else (argv[2] if len(argv) == 3 else ""))
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
