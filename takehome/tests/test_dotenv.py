"""The development .env make writes, how the settings read it, and the port check of make run."""

import os
import socket
import stat
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOTENV = ROOT / "scripts" / "dotenv.py"


def clean_env(**extra) -> dict:
    """The environment without any takehome setting, as in a fresh shell."""
    drop = {"DEBUG", "SECRET_KEY", "SECRET_KEY_FILE", "SITE_URL", "DJANGO_ALLOW_ASYNC_UNSAFE",
            "TAKEHOME_ENV_FILE", "PORT"}
    env = {k: v for k, v in os.environ.items() if k not in drop and not k.startswith("TAKEHOME_")}
    env.update(extra)
    return env


def write_env(path: Path, **env) -> str:
    subprocess.run([sys.executable, str(DOTENV), "write", str(path)], env=clean_env(**env), check=True,
                   capture_output=True, text=True)
    return path.read_text()


def values(text: str) -> dict:
    return dict(line.split("=", 1) for line in text.splitlines() if line and not line.startswith("#"))


def settings_value(name: str, env_file: Path, **env) -> subprocess.CompletedProcess:
    code = f"from django.conf import settings; print(settings.{name})"
    return subprocess.run([sys.executable, "manage.py", "shell", "--no-imports", "-c", code], cwd=ROOT, timeout=300,
                          env=clean_env(TAKEHOME_ENV_FILE=str(env_file), **env), capture_output=True, text=True)


def test_write_makes_a_development_env_for_the_port(tmp_path):
    got = values(write_env(tmp_path / ".env", TAKEHOME_PORT="8123", TAKEHOME_VAR_DIR=str(tmp_path / "var")))
    assert got["DEBUG"] == "true"
    assert got["SECRET_KEY"].startswith("django-insecure-takehome-dev-") and len(got["SECRET_KEY"]) > 60
    assert got["SITE_URL"] == "http://127.0.0.1:8123" and got["TAKEHOME_PORT"] == "8123"
    assert got["TAKEHOME_VAR_DIR"] == str(tmp_path / "var")
    assert stat.S_IMODE((tmp_path / ".env").stat().st_mode) == 0o600  # it holds a secret


def test_defaults_are_port_8000_and_var_beside_the_file(tmp_path):
    got = values(write_env(tmp_path / ".env"))
    assert got["SITE_URL"] == "http://127.0.0.1:8000" and got["TAKEHOME_VAR_DIR"] == str(tmp_path / "var")


def test_an_existing_env_is_never_overwritten(tmp_path):
    path = tmp_path / ".env"
    path.write_text("SITE_URL=https://takehome.example.com\n")
    write_env(path, TAKEHOME_PORT="8123")
    assert path.read_text() == "SITE_URL=https://takehome.example.com\n"


def test_two_writes_give_two_different_keys(tmp_path):
    assert values(write_env(tmp_path / "a"))["SECRET_KEY"] != values(write_env(tmp_path / "b"))["SECRET_KEY"]


def test_manage_py_reads_the_env_file_and_the_environment_wins(tmp_path):
    path = tmp_path / ".env"
    write_env(path, TAKEHOME_PORT="8123", TAKEHOME_VAR_DIR=str(tmp_path / "var"))
    from_file = settings_value("SITE_URL", path)
    assert from_file.returncode == 0, from_file.stderr
    assert from_file.stdout.strip() == "http://127.0.0.1:8123"
    from_env = settings_value("SITE_URL", path, SITE_URL="http://127.0.0.1:8999")
    assert from_env.stdout.strip() == "http://127.0.0.1:8999"


def test_production_refuses_the_key_make_wrote(tmp_path):
    path = tmp_path / ".env"
    write_env(path, TAKEHOME_VAR_DIR=str(tmp_path / "var"))
    # Someone flips DEBUG in the environment (or edits the file) but keeps make's key.
    result = settings_value("DEBUG", path, DEBUG="false", ALLOWED_HOSTS="takehome.example.com")
    assert result.returncode != 0
    assert "Refusing to start in production mode" in result.stderr
    assert "Traceback" not in result.stderr.splitlines()[-1]


def test_a_named_env_file_that_does_not_exist_is_a_clear_error(tmp_path):
    result = settings_value("DEBUG", tmp_path / "missing.env", DEBUG="true")
    assert result.returncode != 0 and "TAKEHOME_ENV_FILE=" in result.stderr and "is not a file" in result.stderr


def test_the_tests_themselves_ignore_the_checkouts_env(settings):
    # Under pytest the settings read no .env, whatever a developer's make wrote.
    assert os.environ["TAKEHOME_ENV_FILE"] == ""


@pytest.fixture
def busy_port():
    """A port in our range that something answers on, so run-supervised stops before starting anything."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


def run_supervised(tmp_path, **env) -> subprocess.CompletedProcess:
    return subprocess.run(["scripts/run-supervised"], cwd=ROOT, timeout=300, capture_output=True, text=True,
                          env=clean_env(TAKEHOME_VAR_DIR=str(tmp_path / "var"), **env))


def test_run_says_loudly_when_site_url_names_another_port(tmp_path, busy_port):
    result = run_supervised(tmp_path, TAKEHOME_ENV_FILE="", TAKEHOME_PORT=str(busy_port),
                            SITE_URL="http://127.0.0.1:8000")
    assert f"SITE_URL is http://127.0.0.1:8000 (port 8000), but the web server will listen on port {busy_port}" \
        in result.stderr
    assert result.returncode == 1  # then stops on the busy port, before starting anything


def test_run_is_quiet_when_site_url_follows_the_port(tmp_path, busy_port):
    result = run_supervised(tmp_path, TAKEHOME_ENV_FILE="", TAKEHOME_PORT=str(busy_port))
    assert "!!!" not in result.stderr


def test_run_takes_the_port_from_the_env_file(tmp_path, busy_port):
    path = tmp_path / ".env"
    write_env(path, TAKEHOME_PORT=str(busy_port))
    result = run_supervised(tmp_path, TAKEHOME_ENV_FILE=str(path))
    assert f"Something already answers on 127.0.0.1:{busy_port}" in result.stderr
    assert "!!!" not in result.stderr


def test_a_real_host_name_is_not_checked_against_the_port(tmp_path, busy_port):
    result = run_supervised(tmp_path, TAKEHOME_ENV_FILE="", TAKEHOME_PORT=str(busy_port),
                            SITE_URL="https://takehome.example.com")
    assert "!!!" not in result.stderr
