"""The hosted session's Submit, in both doors (the panel's button, `gate submit` over the socket): a workspace
without the artifacts the reviewers look for is not submitted until the candidate says "anyway".

The workspace's files are given here (actions._snapshot stands in for reading the sandbox), so these run
without root; test_workspace_gate.py submits from real workspaces and a real shell.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from sessions_app import actions, artifacts
from sessions_app.hosted import workspaces
from sessions_app.models import GateReceipt, Submission
from takehome.models import PacketVersion

from .conftest import url
from .test_workspace_gate import gate, host, send, wait_for_socket, ws_settings  # noqa: F401  (fixtures)

REFUSAL = b"The model offered to drop the refund rows; that changes revenue and hides the bug.\n"
REPLY = b"Remove abs() from the sum in total().\n"
PROMPT = b"invoices.py uses abs() on cents; refunds are negative. Propose a minimal patch.\n"


@pytest.fixture
def workspace(started, ws_settings, media_root, monkeypatch):  # noqa: F811
    """A started hosted session, red, model and green captured by the server; ``files`` is its workspace."""
    workspaces.workspace_row(started)
    files = {**started.packet_version.files_of("fixture"), "artifacts/prompt.txt": PROMPT}
    monkeypatch.setattr(actions, "_snapshot", lambda invitation: dict(files))
    for step, log in (("red", "1 failed in 0.1s\n"), ("model", PROMPT.decode()), ("green", "1 passed in 0.1s\n")):
        GateReceipt.objects.create(invitation=started, step=step, log_text=log, captured_by="server")
    return SimpleNamespace(invitation=started, files=files)


def complete(ws) -> None:
    ws.files.update({"artifacts/model.md": REPLY, "artifacts/refuse.md": REFUSAL})


def nothing_submitted(invitation) -> bool:
    return (not Submission.objects.filter(invitation=invitation).exists()
            and not GateReceipt.objects.filter(invitation=invitation, step="upload").exists())


def submit(client, ws, htmx=True, **data):
    headers = {"HX-Request": "true"} if htmx else {}
    return client.post(url("workspace-submit", ws.invitation), data, headers=headers)


def listed(html: str) -> dict[str, str]:
    """The confirmation's list: path -> its line."""
    items = html.split('id="missing-artifacts"')[1].split("</ul>")[0].split("<li ")[1:]
    return {item.split('data-missing="')[1].split('"')[0]: item.split(">", 1)[1].split("</li>")[0] for item in items}


# --- the rule ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("files, model_step, lacking", [
    ({}, True, ["red.log", "prompt.txt", "model_allowed.at", "model.md", "green.log", "refuse.md"]),
    ({}, False, ["red.log", "green.log", "refuse.md"]),
    ({"artifacts/refuse.md": b" \n\t"}, False, ["red.log", "green.log", "refuse.md"]),
    ({"refuse.md": b"in the wrong folder\n"}, False, ["red.log", "green.log", "refuse.md"]),
    ({f"artifacts/{a.name}": b"x\n" for a in artifacts.EXPECTED}, True, []),
])
def test_missing_artifacts_counts_absent_and_blank_files(files, model_step, lacking):
    assert [m.artifact.name for m in artifacts.missing_artifacts(files, model_step)] == lacking


def test_a_blank_file_is_said_to_be_empty_and_an_absent_one_missing():
    blank, absent = artifacts.missing_artifacts({"artifacts/red.log": b"\n"}, model_step=False)[:2]
    assert blank.line == "artifacts/red.log is empty (the tests failing before your fix: run `python gate.py red`)"
    assert absent.line.startswith("artifacts/green.log is missing (")


# --- the panel's button --------------------------------------------------------------------------------------

def test_a_complete_workspace_submits_at_once(client, workspace):
    complete(workspace)
    html = submit(client, workspace).content.decode()
    assert 'id="workspace-submit-confirm"' not in html and "Submitted: your workspace was stored" in html
    assert Submission.objects.get(invitation=workspace.invitation).via == "hosted"


def test_submit_names_what_is_missing_and_what_it_is_for_and_stores_nothing(client, workspace, media_root):
    response = submit(client, workspace)
    html = response.content.decode()
    assert response.status_code == 200 and "<html" not in html and 'id="workspace-gate"' in html
    assert "Not submitted yet." in html and "Submitted:" not in html
    assert listed(html) == {
        "artifacts/model.md": "<code>artifacts/model.md</code> is missing: the model&#x27;s raw reply.",
        "artifacts/refuse.md": "<code>artifacts/refuse.md</code> is missing: one unsafe patch and why you would "
                               "not apply it.",
    }
    anyway = html.split('id="workspace-submit-confirm"')[1].split("</form>")[0]
    assert 'name="anyway" value="yes"' in anyway and 'id="workspace-submit-anyway"' in anyway
    assert 'hx-target="#workspace-gate"' in anyway and "Submit anyway" in anyway
    assert nothing_submitted(workspace.invitation) and not list(Path(media_root).rglob("*.zip"))


def test_without_javascript_the_whole_workspace_page_answers_with_the_list(client, workspace):
    response = submit(client, workspace, htmx=False)
    html = response.content.decode()
    assert response.status_code == 200 and "<html" in html and 'id="terminal"' in html
    assert set(listed(html)) == {"artifacts/model.md", "artifacts/refuse.md"}
    assert 'action="/t/' in html.split('id="workspace-submit-confirm"')[1].split('name="anyway"')[0]
    assert nothing_submitted(workspace.invitation)


@pytest.mark.parametrize("htmx", [True, False])
def test_submit_anyway_submits_and_says_what_it_went_without(client, workspace, htmx):
    response = submit(client, workspace, htmx=htmx, anyway="yes")
    html = (response.content if htmx else client.get(response.url).content).decode()
    assert "Submitted as it is, without artifacts/model.md and artifacts/refuse.md: your workspace was stored" in html
    assert 'id="workspace-submit-confirm"' not in html
    assert Submission.objects.get(invitation=workspace.invitation).via == "hosted"


def test_a_blank_refusal_is_named_empty(client, workspace):
    workspace.files.update({"artifacts/model.md": REPLY, "artifacts/refuse.md": b"  \n"})
    assert listed(submit(client, workspace).content.decode()) == {
        "artifacts/refuse.md": "<code>artifacts/refuse.md</code> is empty: one unsafe patch and why you would not "
                               "apply it."}
    assert nothing_submitted(workspace.invitation)


def test_a_take_home_without_a_model_asks_for_no_model_reply(client, workspace):
    version = workspace.invitation.packet_version
    PacketVersion.objects.filter(pk=version.pk).update(model_policy=PacketVersion.ModelPolicy.NONE)
    assert set(listed(submit(client, workspace).content.decode())) == {"artifacts/refuse.md"}
    workspace.files["artifacts/refuse.md"] = REFUSAL
    assert "Submitted: your workspace" in submit(client, workspace).content.decode()


def test_the_logs_count_only_as_the_server_captured_them_and_steps_are_said_for_the_workspace(client, workspace):
    complete(workspace)
    GateReceipt.objects.filter(invitation=workspace.invitation, step="green").delete()
    workspace.files["artifacts/green.log"] = b"9 passed (my own)\n"  # the submitted zip replaces it: it counts not
    html = submit(client, workspace).content.decode()
    assert listed(html) == {"artifacts/green.log": "<code>artifacts/green.log</code> is missing: the tests passing "
                            "after your fix: capture green (the button, or <code>gate green</code> in the terminal)."}
    assert "python gate.py" not in html and nothing_submitted(workspace.invitation)


def test_a_late_or_too_soon_submit_says_so_before_any_list(client, workspace, settings):
    complete(workspace)
    assert "Submitted:" in submit(client, workspace).content.decode()
    settings.UPLOAD_INTERVAL_S = 600
    del workspace.files["artifacts/refuse.md"]
    html = submit(client, workspace).content.decode()
    assert "Too soon" in html and "missing-artifacts" not in html


# --- `gate submit` in the terminal, over the socket -------------------------------------------------------------

@pytest.mark.slow
def test_gate_submit_names_what_is_missing_and_submits_only_with_anyway(host, workspace):  # noqa: F811
    path = wait_for_socket(workspace.invitation)
    done = gate(path, "submit")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Reviewers look for these, and your workspace does not have them:" in done.stderr
    assert "  - artifacts/model.md is missing (the model's raw reply)" in done.stderr
    assert "  - artifacts/refuse.md is missing (one unsafe patch and why you would not apply it)" in done.stderr
    assert "Nothing was submitted." in done.stderr and "`gate submit --anyway`" in done.stderr
    assert nothing_submitted(workspace.invitation)

    done = gate(path, "submit", "--anyway")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Submitted as it is, without artifacts/model.md and artifacts/refuse.md" in done.stdout
    assert Submission.objects.get(invitation=workspace.invitation).via == "hosted"


@pytest.mark.slow
def test_the_socket_answers_an_incomplete_submit_with_the_paths(host, workspace):  # noqa: F811
    path = wait_for_socket(workspace.invitation)
    reply = send(path, b'{"command": "submit"}\n')
    assert reply["ok"] is False and reply["incomplete"] is True
    assert reply["missing"] == ["artifacts/model.md", "artifacts/refuse.md"]
    for bad in ({"command": "red", "anyway": True}, {"command": "submit", "anyway": "yes"}):
        assert 'Only submit takes "anyway"' in send(path, json.dumps(bad).encode() + b"\n")["error"]
    assert nothing_submitted(workspace.invitation)
    complete(workspace)
    assert send(path, b'{"command": "submit"}\n')["ok"]  # complete: at once, no anyway needed


def test_gate_help_says_submit_stops_without_anyway(tmp_path):
    done = gate(tmp_path / "nothing.sock", "--help")
    assert done.returncode == 0 and "gate submit --anyway" in done.stdout and "submits nothing" in done.stdout
    assert gate(tmp_path / "nothing.sock", "red", "--anyway").returncode == 2
    assert gate(tmp_path / "nothing.sock", "submit", "--now").returncode == 2
