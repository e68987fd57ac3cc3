"""docker-compose.yml, the Caddyfile, make run's supervisord.conf and the settings agree on names.

(.env.example and the settings: test_settings_registry.py.)
"""

import re
import shlex
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]


def declared() -> dict:
    """Every variable takehome/settings.py declares (shared/settings_env.py), by name."""
    from takehome import settings

    return {name: setting for setting in settings.env.registry for name in setting.names}


def read_by(program: str) -> set[str]:
    return {name for name, setting in declared().items() if program in setting.read_by}


def test_the_knobs_other_programs_read_are_real():
    compose, caddyfile = (ROOT / "docker-compose.yml").read_text(), (ROOT / "Caddyfile").read_text()
    for name in read_by("docker compose"):
        assert "${" + name in compose and "{$" + name in caddyfile
    config = (ROOT / "scripts" / "supervisord.conf").read_text()
    for name in read_by("make run"):
        assert f"%(ENV_{name})s" in config
    assert read_by("docker compose") and read_by("make run")


APP_SERVICES = ("web", "workspaces", "worker", "beat")  # the services built from this repository's image


def test_compose_parses_and_has_the_seven_services():
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    assert set(compose["services"]) == {"caddy", "postgres", "redis", "web", "workspaces", "worker", "beat"}
    for name in APP_SERVICES:
        service = compose["services"][name]
        assert service["build"] == "."
        assert set(service["environment"]) <= {n for n, s in declared().items() if not s.read_by}
        assert service["environment"]["DATABASE_URL"].startswith("postgres://")
        assert service["environment"]["CELERY_BROKER_URL"].startswith("redis://redis:")
    assert "celery" in compose["services"]["worker"]["command"]
    assert "daphne takehome.asgi:application" in compose["services"]["web"]["command"]
    # The workspace host: serve_workspaces with its own daphne, one process.
    assert compose["services"]["workspaces"]["command"][:4] == ["python", "manage.py", "serve_workspaces", "--http"]


def test_the_web_server_holds_a_streamed_model_reply_and_serves_websockets():
    # A reply streams for up to TAKEHOME_MODEL_TIMEOUT_S: daphne's optional request timeout stays off.
    # daphne serves the ASGI app, the pages and the hosted terminal's WebSockets alike.
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]["web"]["command"]
    dockerfile = (ROOT / "Dockerfile").read_text()
    supervisord = (ROOT / "scripts" / "supervisord.conf").read_text()
    for where in (compose, dockerfile.replace('", "', " "), supervisord):
        assert "daphne takehome.asgi:application" in where and "--http-timeout" not in where, where
    assert "gunicorn" not in compose + dockerfile + supervisord.split("[program:web]")[1]


def test_dockerfile_installs_the_sandbox():
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "bubblewrap" in dockerfile and "grading.engine.runner" in dockerfile


def test_compose_never_runs_with_debug_from_a_development_env():
    # The .env make writes says DEBUG=true; compose's own environment wins over env_file.
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    for name in APP_SERVICES:
        assert compose["services"][name]["environment"]["DEBUG"] == "false"


def test_the_image_never_holds_a_dotenv():
    ignored = (ROOT / ".dockerignore").read_text().splitlines()
    assert ".env" in ignored


# --- restarts, healthchecks and one beat ------------------------------------------------------------------------


def compose_services() -> dict:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]


def words(command) -> list[str]:
    """A service's command (a list, or a string the shell splits) as its words."""
    return shlex.split(command) if isinstance(command, str) else list(command)


def celery_subcommand(service: dict) -> str | None:
    """`worker` or `beat` when the service runs `celery -A takehome <that>`, else None."""
    command = words(service.get("command", []))
    if command[:3] != ["celery", "-A", "takehome"]:
        return None
    return command[3]


def test_every_service_restarts_and_has_a_healthcheck():
    for name, service in compose_services().items():
        assert service.get("restart") == "unless-stopped", f"{name} has no restart policy"
        test = service.get("healthcheck", {}).get("test")
        assert test and test[0] in ("CMD", "CMD-SHELL") and len(test) > 1, f"{name} has no healthcheck"
        assert not service["healthcheck"].get("disable"), name


def test_exactly_one_service_runs_beat_and_no_worker_runs_it_too():
    services = compose_services()
    beats = [name for name, service in services.items() if celery_subcommand(service) == "beat"]
    workers = [name for name, service in services.items() if celery_subcommand(service) == "worker"]
    assert beats == ["beat"] and workers == ["worker"]
    for name in workers:
        assert not {"--beat", "-B"} & set(words(services[name]["command"])), f"{name} runs beat as well"
    # One beat however many workers are asked for: nothing scales it up.
    assert services["beat"].get("deploy", {}).get("replicas", 1) == 1 and "scale" not in services["beat"]


def test_make_run_runs_beat_once_beside_its_worker():
    import configparser

    config = configparser.RawConfigParser()
    config.read_string((ROOT / "scripts" / "supervisord.conf").read_text())
    commands = {section: config.get(section, "command").split()
                for section in config.sections() if section.startswith("program:")}
    celery = {section: command[command.index("-A") + 2] for section, command in commands.items()
              if any(word.endswith("/celery") for word in command)}
    assert sorted(celery.values()) == ["beat", "worker"], celery
    assert not {"--beat", "-B"} & set(commands["program:worker"])


def test_the_healthchecks_ask_what_each_service_is_for():
    services = compose_services()
    # The web server: daphne's own liveness, over the PROXY protocol its endpoint requires.
    web = services["web"]["healthcheck"]["test"]
    assert web[:4] == ["CMD", "python", "-m", "shared.probe"] and "--proxy-protocol" in web
    daphne = " ".join(services["web"]["command"].split())
    assert "haproxy:tcp:port=8000:" in daphne and web[-1] == "http://127.0.0.1:8000/healthz"
    # The worker: this worker (celery@<container host name>) answers a ping; $$ keeps compose's hands off.
    worker = services["worker"]["healthcheck"]["test"]
    assert worker[0] == "CMD-SHELL" and worker[1].startswith("celery -A takehome inspect ping ")
    assert "--destination celery@$$HOSTNAME" in worker[1]
    # beat: what it makes, a worker's heartbeat.
    assert services["beat"]["healthcheck"]["test"] == ["CMD", "python", "manage.py", "health", "workers"]
    assert services["redis"]["healthcheck"]["test"] == ["CMD", "redis-cli", "ping"]
    assert services["postgres"]["healthcheck"]["test"][:2] == ["CMD", "pg_isready"]
    assert "http://127.0.0.1:2019/" in services["caddy"]["healthcheck"]["test"][-1]  # Caddy's admin API
    # The workspace host: its daphne's liveness, on the loop its gate host runs on.
    workspaces = services["workspaces"]["healthcheck"]["test"]
    assert workspaces == ["CMD", "python", "-m", "shared.probe", "--proxy-protocol", "http://127.0.0.1:8000/healthz"]
    assert services["workspaces"]["command"][4] == "haproxy:tcp:port=8000:interface=0.0.0.0"
    # What needs Redis waits until it answers, not merely until its container started.
    for name in APP_SERVICES:
        assert services[name]["depends_on"]["redis"] == {"condition": "service_healthy"}, name


# --- privileges: who runs as what, with which capabilities (docs/security.md) -------------------------------------

SANDBOX_HOSTS = {"worker", "workspaces"}  # they start bubblewrap sandboxes under uids of their own
# Of Docker's default capabilities, what starting a sandbox under its uid takes (docker-compose.yml says why
# each); SYS_ADMIN, to mount the workspaces' tmpfs, is the workspace host's alone.
SANDBOX_CAPS = {"SETUID", "SETGID", "SETPCAP", "CHOWN", "FOWNER", "DAC_OVERRIDE", "KILL"}
ROOTS = {"root", "0"}


def unconfined(service: dict) -> set[str]:
    """The profiles the service runs without: seccomp, apparmor (either spelling, = or :)."""
    options = [option.replace(":", "=") for option in service.get("security_opt", [])]
    return {option.split("=")[0] for option in options if option.endswith("=unconfined")}


def image_user() -> str:
    """The user the image runs as (its last USER), made by the Dockerfile."""
    users = re.findall(r"^USER\s+(\S+)\s*$", (ROOT / "Dockerfile").read_text(), re.M)
    assert users, "the Dockerfile sets no USER: every service would run as root"
    return users[-1]


def runs_as(service: dict) -> str:
    return str(service.get("user", image_user())).split(":")[0]


def test_only_the_sandbox_hosts_hold_capabilities_or_run_unconfined():
    services = compose_services()
    for name, service in services.items():
        assert not service.get("privileged"), f"{name} is privileged"
        if name not in SANDBOX_HOSTS:
            assert not service.get("cap_add") and not unconfined(service), f"{name} needs no privilege"
    # The web server, which faces the internet, and beat: nothing at all, nor a way to gain it.
    for name in ("web", "beat"):
        service = services[name]
        assert "cap_add" not in service and not unconfined(service), name
        assert service["cap_drop"] == ["ALL"] and "no-new-privileges:true" in service["security_opt"], name
    # The sandbox hosts: every default dropped, then what bubblewrap needs; mounts for the workspace host only.
    for name in SANDBOX_HOSTS:
        service = services[name]
        assert service["cap_drop"] == ["ALL"], name
        assert set(service["cap_add"]) == SANDBOX_CAPS | ({"SYS_ADMIN"} if name == "workspaces" else set()), name
        assert unconfined(service) == {"seccomp", "apparmor"}, name


def test_the_web_server_and_beat_run_as_a_user_that_is_not_root():
    dockerfile = (ROOT / "Dockerfile").read_text()
    user = image_user()
    assert user == "takehome" and "useradd --system --uid 10001 --gid takehome" in dockerfile
    services = compose_services()
    for name in ("web", "beat"):
        assert runs_as(services[name]) not in ROOTS, f"{name} runs as root"
        assert services[name]["user"] == "takehome", name  # said in the compose file, not left to the image
    # root only where a sandbox is started, and said so there
    for name in APP_SERVICES:
        if runs_as(services[name]) in ROOTS:
            assert name in SANDBOX_HOSTS and services[name]["user"] == "root", name


def security_page_rows() -> dict[str, dict[str, str]]:
    """docs/security.md's table "The containers and their privileges": each service's cells, by column."""
    page = (ROOT / "docs" / "security.md").read_text()
    section = page.split("## The containers and their privileges", 1)[1].split("\n## ", 1)[0]
    lines = [line for line in section.splitlines() if line.startswith("|")]
    header = [cell.strip() for cell in lines[0].strip("|").split("|")]
    rows = {}
    for line in lines[2:]:
        cells = dict(zip(header, (cell.strip() for cell in line.strip("|").split("|")), strict=True))
        for name in re.findall(r"`([a-z]+)`", cells["service"]):
            rows[name] = cells
    return rows


def test_the_security_page_lists_each_services_privileges_as_the_compose_file_gives_them():
    rows = security_page_rows()
    services = compose_services()
    assert set(rows) == set(services)
    for name, service in services.items():
        row = rows[name]
        said_caps = set(re.findall(r"`([A-Z_]+)`", row["capabilities"]))
        assert said_caps == set(service.get("cap_add", [])), name
        if service.get("cap_drop") == ["ALL"] and not service.get("cap_add"):
            assert row["capabilities"].startswith("none"), name
        if service.get("cap_add"):
            assert "every other dropped" in row["capabilities"], name
        assert ("no-new-privileges" in row["capabilities"]) == ("no-new-privileges:true" in service.get(
            "security_opt", [])), name
        assert (row["seccomp, AppArmor"] == "unconfined") == (unconfined(service) == {"seccomp", "apparmor"}), name
        if name in APP_SERVICES:
            user = runs_as(service)
            assert row["runs as"].split()[0].strip("`") == user, name


def test_each_service_runs_one_long_lived_process_and_no_shell_loop():
    for name, service in compose_services().items():
        command = service.get("command")
        if not command:
            continue
        text = command if isinstance(command, str) else " ".join(command)
        # why: a `while true; do ...; done` keeps a program alive outside Docker's restart policy and
        # healthcheck, which then see only the shell
        assert not re.search(r"\b(while|until)\b|\bfor\b.+\bdo\b", text), f"{name} loops in its command"
        said = words(command)
        if said[:2] == ["sh", "-c"]:
            script = said[2]
            assert not re.search(r"(?<!&)&(?!&)", script), f"{name} starts a second process in the background"
            last = script.split("&&")[-1].split()
            assert last[0] == "exec", f"{name}: the shell must give its place to the server (exec)"


def test_the_image_installs_the_runtime_requirements_only():
    dockerfile = "\n".join(line for line in (ROOT / "Dockerfile").read_text().splitlines()
                           if not line.lstrip().startswith("#"))
    installs = re.findall(r"pip install[^\n]*", dockerfile)
    assert installs == ["pip install --no-cache-dir -r requirements.txt"], installs
    assert "COPY requirements.txt ." in dockerfile and "requirements-" not in dockerfile
    # what only working on takehome needs stays out of the build context
    ignored = set((ROOT / ".dockerignore").read_text().splitlines())
    assert {".git", "docs/", "bench/", ".venv", "var/"} <= ignored


def test_every_compose_service_rotates_its_logs():
    """Docker's json-file driver keeps a container's output whole unless told a size and a number of files."""
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    for name, service in compose["services"].items():
        logging = service.get("logging") or {}
        options = logging.get("options") or {}
        assert logging.get("driver") == "json-file", name
        assert options.get("max-size") and int(options.get("max-file", 0)) >= 2, name


def workspace_host_daphne() -> str:
    """The daphne options of the workspace host (serve_workspaces --http), as one line."""
    from sessions_app.hosted.host_server import daphne_arguments

    return " ".join(daphne_arguments(["haproxy:tcp:port=8000:interface=0.0.0.0"], proxy_headers=False))


def test_daphne_writes_no_access_log_of_its_own():
    """daphne's access log names each path whole, a candidate's link token with it; the app logs the route."""
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]["web"]["command"]
    dockerfile = (ROOT / "Dockerfile").read_text().replace('", "', " ")
    supervisord = (ROOT / "scripts" / "supervisord.conf").read_text().split("[program:web]")[1]
    for where in (compose, dockerfile, supervisord, workspace_host_daphne()):
        assert "--verbosity 0" in where and "--access-log" not in where, where
    assert "--application-close-timeout 10" in workspace_host_daphne()


# --- Caddy in front (Caddyfile) -------------------------------------------------------------------


def parse_caddyfile(text: str) -> list[tuple[list[str], list]]:
    """The Caddyfile as a tree of (tokens of a line, the lines of its block).

    Enough of Caddy's own grammar to read ours: words split on blanks, quotes,
    # comments, a block opened by a trailing { and closed by a lone }. Anything
    else (an unclosed block, a stray }) is an error here as it is for Caddy.
    """
    root: list = []
    stack = [root]
    for number, line in enumerate(text.splitlines(), 1):
        lexer = shlex.shlex(line, posix=True)
        lexer.whitespace_split, lexer.commenters = True, "#"
        tokens = list(lexer)
        if not tokens:
            continue
        if tokens == ["}"]:
            assert len(stack) > 1, f"Caddyfile line {number}: }} closes nothing"
            stack.pop()
            continue
        assert "}" not in tokens and tokens.count("{") <= 1, f"Caddyfile line {number}: one block per line"
        if tokens[-1] == "{":
            node = (tokens[:-1], [])
            stack[-1].append(node)
            stack.append(node[1])
        else:
            stack[-1].append((tokens, []))
    assert len(stack) == 1, "Caddyfile: a block is never closed"
    return root


def directive(block: list, name: str) -> tuple[list[str], list]:
    found = [node for node in block if node[0][0] == name]
    assert len(found) == 1, f"expected one {name!r}, found {len(found)}"
    return found[0]


def snippets_and_sites(text: str) -> tuple[dict[str, list], list[tuple[list[str], list]]]:
    """The Caddyfile's snippets, by name, and its site blocks."""
    tree = parse_caddyfile(text)
    snippets = {tokens[0][1:-1]: block for tokens, block in tree if tokens[0].startswith("(")}
    return snippets, [(tokens, block) for tokens, block in tree if not tokens[0].startswith("(")]


def proxies(site: list) -> dict[str, tuple[list[str], list]]:
    """The site's two reverse_proxy blocks, by the handle they are in: "workspace" (the @workspace matcher's)
    and "web" (the catch-all's)."""
    found = {}
    for tokens, block in site:
        if tokens[0] == "handle":
            found["workspace" if tokens[1:] == ["@workspace"] else "web" if len(tokens) == 1 else tokens[1]] = (
                directive(block, "reverse_proxy"))
    assert set(found) == {"workspace", "web"}, found
    return found


def test_caddyfile_parses_into_one_site_that_proxies_to_daphne():
    snippets, sites = snippets_and_sites((ROOT / "Caddyfile").read_text())
    # A host name from the environment, localhost by default: Caddy gets a public certificate
    # for a real name and uses its internal CA for localhost; no explicit http:// or port, so
    # it serves https and redirects http.
    assert [tokens for tokens, _ in sites] == [["{$TAKEHOME_HOST:localhost}"]]
    site = sites[0][1]
    found = proxies(site)
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    web = compose["services"]["web"]
    assert found["web"][0][1:] == ["{$TAKEHOME_UPSTREAM:web:8000}"]
    assert "tcp:port=8000:interface=0.0.0.0" in " ".join(web["command"].split())
    # The workspaces' requests go to the workspace hosts, compose's by default.
    assert found["workspace"][0][1:] == ["{$TAKEHOME_WORKSPACE_UPSTREAMS:workspaces:8000}"]
    caddy = compose["services"]["caddy"]
    assert caddy["environment"]["TAKEHOME_WORKSPACE_UPSTREAMS"] == "${TAKEHOME_WORKSPACE_UPSTREAMS:-workspaces:8000}"
    assert "tcp:port=8000:interface=0.0.0.0" in compose["services"]["workspaces"]["command"][4]
    for _, proxy in found.values():
        # Caddy must set X-Forwarded-Proto itself (its default), never pass on a fixed or the client's value.
        assert not any(t[0] == "header_up" and "X-Forwarded-Proto" in t for t, _ in proxy)
        # By default (compose) each connection to daphne opens with the PROXY protocol line daphne requires.
        assert directive(proxy, "import")[0] == ["import", "upstream-{$TAKEHOME_UPSTREAM_TRANSPORT:proxy-protocol}"]
    _, transport = directive(snippets["upstream-proxy-protocol"], "transport")
    assert directive(transport, "proxy_protocol")[0] == ["proxy_protocol", "v1"]
    assert "-e haproxy:tcp:" in " ".join(web["command"].split())  # daphne reads the PROXY line
    assert directive(snippets["upstream-plain"], "transport")[0] == ["transport", "http"]
    _, body = directive(site, "request_body")
    size = directive(body, "max_size")[0][1]
    assert size.endswith("MB") and int(size[:-2]) * 10**6 > 20 * 2**20  # above the default upload limit
    # No Server header of Caddy's, on answers and on error pages alike.
    assert directive(site, "header")[0] == ["header", "-Server"]
    assert directive(directive(site, "handle_errors")[1], "header")[0] == ["header", "-Server"]


def test_caddy_sends_an_invitations_workspace_requests_to_one_host_by_its_token():
    from sessions_app.hosted.paths import WORKSPACE_PATH

    _, sites = snippets_and_sites((ROOT / "Caddyfile").read_text())
    site = sites[0][1]
    # The workspaces' paths, by the app's own expression (sessions_app/hosted/paths.py), the token its group 1.
    assert directive(site, "@workspace")[0] == ["@workspace", "path_regexp", "workspace", WORKSPACE_PATH.pattern]
    handle = next(block for tokens, block in site if tokens == ["handle", "@workspace"])
    # The token, in a header of Caddy's own making (a client's is replaced), hashed to pick the host, and
    # taken off before the request goes on.
    assert directive(handle, "request_header")[0] == ["request_header", "X-Takehome-Workspace", "{re.workspace.1}"]
    _, proxy = directive(handle, "reverse_proxy")
    assert directive(proxy, "lb_policy")[0] == ["lb_policy", "header", "X-Takehome-Workspace"]
    assert directive(proxy, "header_up")[0] == ["header_up", "-X-Takehome-Workspace"]
    # The catch-all comes after, so the workspaces' matcher is tried first; nothing is proxied outside them.
    handles = [tokens for tokens, _ in site if tokens[0] == "handle"]
    assert handles == [["handle", "@workspace"], ["handle"]]
    assert not [tokens for tokens, _ in site if tokens[0] == "reverse_proxy"]


def test_compose_serves_caddys_page_for_an_upload_over_its_limit():
    caddy = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]["caddy"]
    assert "./caddy:/srv/takehome-pages:ro" in caddy["volumes"]
    assert "{$TAKEHOME_PROXY_PAGES:/srv/takehome-pages}" in (ROOT / "Caddyfile").read_text()
    assert (ROOT / "caddy" / "upload-too-large.html").is_file()
    # The page states the app's limit, passed on from .env, with the app's own default.
    default = declared()["TAKEHOME_UPLOAD_MAX_BYTES"].default
    assert caddy["environment"]["TAKEHOME_UPLOAD_MAX_BYTES"] == f"${{TAKEHOME_UPLOAD_MAX_BYTES:-{default}}}"


def test_no_server_header_from_daphne():
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]["web"]["command"]
    dockerfile = (ROOT / "Dockerfile").read_text().replace('", "', " ")
    supervisord = (ROOT / "scripts" / "supervisord.conf").read_text().split("[program:web]")[1]
    for where in (compose, dockerfile, supervisord, workspace_host_daphne()):
        assert "--no-server-name" in where, where


def test_compose_publishes_only_caddy():
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    published = {name for name, service in compose["services"].items() if service.get("ports")}
    assert published == {"caddy"}
    caddy = compose["services"]["caddy"]
    assert {"80:80", "443:443"} <= set(caddy["ports"])
    assert "./Caddyfile:/etc/caddy/Caddyfile:ro" in caddy["volumes"]
    assert caddy["image"].startswith("caddy:")
    assert compose["services"]["web"]["expose"] == ["8000"] and compose["services"]["workspaces"]["expose"] == ["8000"]
    # Certificates survive a restart (ACME authorities limit how often a name may ask).
    assert any(v.startswith("caddydata:/data") for v in caddy["volumes"]) and "caddydata" in compose["volumes"]


def test_parse_caddyfile_refuses_unbalanced_blocks():
    with pytest.raises(AssertionError, match="never closed"):
        parse_caddyfile("localhost {\n  reverse_proxy web:8000\n")
    with pytest.raises(AssertionError, match="closes nothing"):
        parse_caddyfile("localhost\n}\n")

