"""Which requests belong to an invitation's workspace: the ones a workspace host serves.

An invitation's workspace (its files, its shell, its recording) lives on the host that opened it. Every
request that may read or change it goes there: the workspace's page and what the page calls (the gate's
buttons, the editor, the read-only files after the deadline), the terminal's WebSocket, and the model
window (it writes each reply into the workspace, and the chat reads the workspace's prompt). Everything
else of the candidate's (the landing page, the download, the zip's upload, the gate receipts of gate.py)
touches no workspace, and the web server answers it.

The Caddyfile routes with the same expression (its ``@workspace`` matcher, a test keeps them equal) and
picks the host by a hash of the token, the first group, so that all of one invitation's requests reach
one host.
"""

from __future__ import annotations

import re

# why no more than the prefix: a route added under /workspace/ or /model/ goes to the workspace's host with
# the rest; a route that touches the workspace elsewhere must be added here (test_workspace_paths.py).
WORKSPACE_PATH = re.compile(r"^/t/([^/]+)/(workspace|terminal|model)(/|$)")

# What a workspace host answers besides: its liveness and readiness (shared/health.py).
HEALTH_PATHS = ("/healthz", "/readyz")


def is_workspace_path(path: str) -> bool:
    """Whether a request for ``path`` goes to the host of the invitation's workspace."""
    return WORKSPACE_PATH.match(path) is not None


def served_by_workspace_host(path: str) -> bool:
    """Whether a workspace host answers ``path``: the workspaces' paths and the health probes, nothing else."""
    return path in HEALTH_PATHS or is_workspace_path(path)
