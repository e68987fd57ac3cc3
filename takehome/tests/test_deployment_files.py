"""docker-compose.yml, .env.example and the settings agree on names."""

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
SETTINGS = (ROOT / "takehome" / "settings.py").read_text()


def names_read_by_settings() -> set[str]:
    found = set(re.findall(r'env(?:\.\w+|_bool)?\(\s*"([A-Z][A-Z0-9_]*)"', SETTINGS))
    found |= set(re.findall(r'os\.environ\.get\(\s*"([A-Z][A-Z0-9_]*)"', SETTINGS))
    found |= {f"{n}_FILE" for n in re.findall(r'_secret\(\s*"([A-Z_]+)"', SETTINGS)}
    found |= set(re.findall(r'_secret\(\s*"([A-Z_]+)"', SETTINGS))
    return found


def names_in_env_example() -> set[str]:
    text = (ROOT / ".env.example").read_text()
    return set(re.findall(r"^([A-Z][A-Z0-9_]*)=", text, re.M))


EXTRA_DOCUMENTED = {"TAKEHOME_PORT", "TAKEHOME_WORKER_CONCURRENCY"}  # read by make run's supervisord.conf


def test_every_setting_is_documented_in_env_example():
    assert names_read_by_settings() <= names_in_env_example()
    assert names_in_env_example() - names_read_by_settings() <= EXTRA_DOCUMENTED


def test_make_run_knobs_are_real():
    config = (ROOT / "scripts" / "supervisord.conf").read_text()
    for name in EXTRA_DOCUMENTED:
        assert f"%(ENV_{name})s" in config


def test_compose_parses_and_has_the_four_services():
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    assert set(compose["services"]) == {"postgres", "redis", "web", "worker"}
    for name in ("web", "worker"):
        service = compose["services"][name]
        assert service["build"] == "."
        assert set(service["environment"]) <= names_read_by_settings()
        assert service["environment"]["DATABASE_URL"].startswith("postgres://")
        assert service["environment"]["CELERY_BROKER_URL"].startswith("redis://redis:")
    assert "celery" in compose["services"]["worker"]["command"]
    assert "gunicorn" in compose["services"]["web"]["command"]


def test_dockerfile_installs_the_sandbox():
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "bubblewrap" in dockerfile and "grading.runner" in dockerfile


def test_compose_never_runs_with_debug_from_a_development_env():
    # The .env make writes says DEBUG=true; compose's own environment wins over env_file.
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    for name in ("web", "worker"):
        assert compose["services"][name]["environment"]["DEBUG"] == "false"


def test_the_image_never_holds_a_dotenv():
    ignored = (ROOT / ".dockerignore").read_text().splitlines()
    assert ".env" in ignored
