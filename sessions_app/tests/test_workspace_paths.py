"""Which of the candidate's requests go to the host of their workspace (sessions_app/hosted/paths.py).

A route that reads or changes a workspace must be among them, or a web server that holds no workspaces gets
it; a route that touches none stays with the web server, out of the privileged host's reach.
"""

from __future__ import annotations

import pytest
from django.urls import URLPattern, get_resolver, reverse

from sessions_app.hosted.paths import is_workspace_path, served_by_workspace_host

TOKEN = "Zm9vYmFyLXRva2VuLTEyMzQ1Njc4OTA"

# The routes that touch an invitation's workspace: its page (the read-only files after the deadline), the
# gate's buttons, the editor, and the model window and chat (a reply is written into the workspace, the chat
# reads its prompt.txt).
ON_THE_WORKSPACE_HOST = {
    "workspace", "workspace-capture", "workspace-submit", "workspace-restart", "workspace-read-only",
    "workspace-files", "workspace-file-read", "workspace-file-save", "workspace-file-create",
    "workspace-file-rename", "model-chat", "model-list", "model-chat-panel",
}
SAMPLE_ARGS = {"step": "red", "pk": 7}


def candidate_routes() -> dict[str, str]:
    """Every URL of sessions_app, by name, reversed with a token (and a step or an id where it takes one)."""
    resolver = get_resolver().url_patterns
    namespace = next(p for p in resolver if getattr(p, "namespace", None) == "sessions_app")
    found = {}
    for pattern in namespace.url_patterns:
        assert isinstance(pattern, URLPattern), pattern
        kwargs = {"token": TOKEN, **{k: v for k, v in SAMPLE_ARGS.items() if k in pattern.pattern.converters}}
        found[pattern.name] = reverse(f"sessions_app:{pattern.name}", kwargs=kwargs)
    return found


def test_every_route_that_touches_a_workspace_goes_to_its_host_and_no_other():
    routes = candidate_routes()
    assert ON_THE_WORKSPACE_HOST <= set(routes), ON_THE_WORKSPACE_HOST - set(routes)
    for name, path in routes.items():
        assert is_workspace_path(path) == (name in ON_THE_WORKSPACE_HOST), (name, path)


def test_the_terminals_websocket_goes_there_too():
    from takehome.asgi import websocket_urls

    (terminal,) = websocket_urls
    path = "/" + str(terminal.pattern).replace("<str:token>", TOKEN)
    assert is_workspace_path(path)


@pytest.mark.parametrize("path", ["/t/x/workspaces", "/t/x/modeling", "/t/x/y/workspace", "/workspace",
                                  "/t//workspace", "/t/x/upload", "/review/1/session.cast"])
def test_lookalikes_stay_with_the_web_server(path):
    assert not is_workspace_path(path)


def test_a_workspace_host_answers_its_health_probes_besides():
    assert served_by_workspace_host("/healthz") and served_by_workspace_host("/readyz")
    assert not served_by_workspace_host("/accounts/login/") and not served_by_workspace_host("/metrics")
