"""GET /t/<token>/download: the tree with a personalised gate.py and a README."""

import io
import zipfile

import pytest

from takehome.actions import sample_content

from .conftest import url

pytestmark = pytest.mark.django_db


def unzip(data: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        return {info.filename: zf.read(info) for info in zf.infolist()}


def test_download_waits_for_start(client, invitation):
    r = client.get(url("download", invitation), follow=True)
    assert "Press Start first" in r.content.decode()
    assert r.headers["Content-Type"].startswith("text/html")


def test_download_refuses_json_clients_before_start(client, invitation):
    r = client.get(url("download", invitation), headers={"Accept": "application/json"})
    assert r.status_code == 409 and "Press Start first" in r.json()["message"]


def test_the_zip_holds_the_fixture_the_gate_and_a_readme(client, started, settings):
    settings.SITE_URL = "https://jobs.example.com"
    r = client.get(url("download", started))
    assert r.status_code == 200
    assert r.headers["Content-Type"] == "application/zip"
    assert 'filename="refund-sum.zip"' in r.headers["Content-Disposition"]
    files = unzip(r.content)
    fixture = sample_content()[2].fixture
    for path, data in fixture.items():
        assert files[f"refund-sum/{path}"] == data
    gate = files["refund-sum/gate.py"].decode()
    assert f'TOKEN = "{started.raw_token}"' in gate
    assert 'SERVER = "https://jobs.example.com"' in gate
    assert "__TAKEHOME_" not in gate
    compile(gate, "gate.py", "exec")
    readme = files["refund-sum/README.txt"].decode()
    assert "python gate.py red" in readme and "red means the test runner printed FAILED" in readme
    assert f"https://jobs.example.com/t/{started.raw_token}/" in readme
    # The README agrees with the page: uploads stay open through the grace period, not just to the deadline.
    assert "upload again until uploads close" in readme and "again before the\ndeadline" not in readme


def test_the_gate_keeps_the_articles_refusals_and_artifact_names(client, started):
    gate = unzip(client.get(url("download", started)).content)["refund-sum/gate.py"].decode()
    for text in ("red.log is green. The gate wants a failure.", "No red log. The model waits.",
                 "Write artifacts/prompt.txt first.", "Green before model is a skip, not a pass.",
                 "still red", '"red.log"', '"prompt.txt"', '"model_allowed.at"', '"green.log"'):
        assert text in gate


def test_a_value_cannot_break_out_of_the_gate_strings():
    from sessions_app.bundle import personalise_gate

    source = personalise_gate(server='http://x"; import os; os.system("boom")  # ', token="t",
                              test_command="python -m pytest -q", max_bytes=10)
    namespace: dict = {}
    exec(compile(source.split("ROOT = ")[0], "gate.py", "exec"), namespace)
    assert namespace["SERVER"].startswith('http://x"; import os')
    assert namespace["MAX_UPLOAD_BYTES"] == 10


@pytest.mark.parametrize("policy, model_step", [("provided", True), ("own", True), ("none", False)])
def test_the_gate_looks_for_the_servers_list_of_artifacts(policy, model_step):
    from sessions_app import artifacts
    from sessions_app.bundle import personalise_gate

    source = personalise_gate(server="http://x", token="t", test_command="python -m pytest -q", max_bytes=10,
                              model_policy=policy)
    namespace: dict = {"__file__": "/nowhere/gate.py", "__name__": "gate"}
    exec(compile(source, "gate.py", "exec"), namespace)
    # one list for both ways of working: the hosted submit checks the same (sessions_app.artifacts)
    assert namespace["EXPECTED"] == [[a.name, a.what] for a in artifacts.expected(model_step)]
    assert ("model.md" in {name for name, _ in namespace["EXPECTED"]}) is model_step


MODEL_STEPS = {
    "provided": ["python gate.py ask", "any API key and the base URL", "artifacts/model.md"],
    "own": ["python gate.py model", "ask your own model", "artifacts/model.md"],
    "none": ["uses no model: there is no model step"],
}


@pytest.mark.parametrize("policy, setting_url", [("provided", ""), ("own", ""), ("", ""), ("none", ""),
                                                   ("", "http://127.0.0.1:9/v1")])
def test_the_readme_and_the_page_explain_the_model_step_as_the_policy_has_it(client, started, settings, policy,
                                                                             setting_url):
    from takehome.models import PacketVersion, effective_policy

    settings.SITE_URL, settings.MODEL_URL = "https://jobs.example.com", setting_url
    PacketVersion.objects.filter(pk=started.packet_version.pk).update(model_policy=policy)
    started.packet_version.refresh_from_db()
    effective = effective_policy(started.packet_version)
    others = {w for p, words in MODEL_STEPS.items() if p != effective for w in words} - set(MODEL_STEPS[effective])
    base_url = f"https://jobs.example.com/t/{started.raw_token}/model/v1"

    files = unzip(client.get(url("download", started)).content)
    readme = files["refund-sum/README.txt"].decode()
    page = client.get(url("landing", started)).content.decode()
    step = page[page.index('id="model-step"'):page.index("</li>", page.index('id="model-step"'))]
    for text in (readme, step):
        assert all(w in text for w in MODEL_STEPS[effective]), text
        assert not any(w in text for w in others), text
        assert (base_url in text) == (effective == "provided")
    assert f'MODEL_POLICY = "{effective}"' in files["refund-sum/gate.py"].decode()
