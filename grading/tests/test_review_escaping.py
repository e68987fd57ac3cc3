"""Everything a candidate wrote is shown as text: script tags, HTML and ANSI escapes in every artifact and file name."""

import pytest

from grading.tests.reviewing import ideal_evidence, make_submission, score
from sessions_app.models import GateReceipt

pytestmark = pytest.mark.django_db

PAYLOAD = ('<script>alert("x")</script><img src=x onerror="alert(1)"><svg onload="alert(2)">'
           '</pre></svg><b id="injected">bold</b>\x1b[31mred\x1b[0m\x1b]0;title\x07"\'&')
ALL_PASS = {"red_log": True, "model_waited": True, "refusal_specific": True, "test_names_bug": True}


def hostile_evidence() -> dict:
    """The honest evidence with the payload in every string a candidate controls."""
    e = ideal_evidence()
    e["archive"]["kept"] = [PAYLOAD + ".py"]
    e["archive"]["skipped"] = [PAYLOAD]
    e["red_log"]["signals"] = [PAYLOAD]
    e["red_log"]["missing"] = [PAYLOAD]
    e["red_log"]["failing_ids"] = [f"test_{PAYLOAD}.py::test_x"]
    e["original_run"]["failing_ids"] = [PAYLOAD]
    for event in e["timeline"]["events"]:
        event["name"] = PAYLOAD + event["name"]
        event["source"] = PAYLOAD
        event["precision"] = PAYLOAD
    e["timeline"]["events"].append({"name": PAYLOAD, "at": PAYLOAD, "source": PAYLOAD, "precision": PAYLOAD})
    e["timeline"]["problems"] = [PAYLOAD]
    e["timeline"]["notes"] = [PAYLOAD]
    e["timeline"]["events"].append({"name": "receipt: " + PAYLOAD + " (refused)", "at": "2026-11-30T14:00:00+00:00",
                                    "source": PAYLOAD, "precision": PAYLOAD})
    e["timeline"]["receipts"] = [{"id": PAYLOAD, "step": PAYLOAD, "at": PAYLOAD, "accepted": False, "refusal": PAYLOAD,
                                  "local_time": PAYLOAD, "after_deadline": True,
                                  "checks": [{"ok": False, "text": PAYLOAD}, {"ok": None, "text": PAYLOAD}]},
                                 {"id": 2, "step": "red", "at": "2026-11-30T14:00:00+00:00", "accepted": True,
                                  "refusal": None, "local_time": PAYLOAD, "after_deadline": False,
                                  "checks": [{"ok": True, "text": PAYLOAD}]}]
    e["timeline"]["gate_log"] = [
        {"line": 1, "text": PAYLOAD, "step": PAYLOAD, "local_time": PAYLOAD, "witnessed": False, "why": PAYLOAD,
         "receipt": None, "refused": False, "refusal": None, "known": None},
        {"line": 2, "text": PAYLOAD, "step": PAYLOAD, "local_time": PAYLOAD, "witnessed": True, "why": None,
         "receipt": PAYLOAD, "refused": True, "refusal": PAYLOAD, "known": False},
        {"line": 3, "text": PAYLOAD, "step": None, "local_time": None, "witnessed": None, "why": None,
         "receipt": None, "refused": False, "refusal": None, "known": None},
    ]
    for run in e["runs"].values():
        run["log"] = PAYLOAD + "\n" + run["log"]
        run["notes"] = [PAYLOAD]
        run["purpose"] = PAYLOAD
        run["outcome"] = PAYLOAD
        run["expected"] = PAYLOAD
        for t in run.get("tests", []):
            t["nodeid"] = PAYLOAD
    for f in e["diff"]["files"]:
        f["path"] = f"{PAYLOAD}/{f['path']}"
        f["diff"] = f["diff"] + f"+{PAYLOAD}\n-{PAYLOAD}\n"
        f["status"] = PAYLOAD
    e["diff"]["files"].append({"path": PAYLOAD + ".bin", "status": "added", "diff": "", "is_test": False, "binary": True})
    e["diff"]["flags"] = [PAYLOAD]
    e["refusal"]["mentions"] = [PAYLOAD]
    e["texts"] = {name: PAYLOAD + "\n[link](javascript:alert(3))\n" for name in
                  ("red.log", "prompt.txt", "model.md", "green.log", "refuse.md", "notes.md", "model_allowed.at")}
    exchange = {"at": "2026-11-30T14:09:00+00:00", "messages": [{"role": PAYLOAD, "content": PAYLOAD},
                                                                {"role": "user", "content": [{"type": "text", "text": PAYLOAD}]}],
                "reply": PAYLOAD, "model": PAYLOAD, "tokens_in": PAYLOAD, "tokens_out": 3, "latency_s": 40.0,
                "error": PAYLOAD}
    diff = f"--- exchange 1 (server)\n+++ artifacts/prompt.txt\n@@ -1 +1 @@\n-{PAYLOAD}\n+{PAYLOAD}\n"
    e["model"] = {"policy": PAYLOAD, "configured": True, "exchanges": [exchange, {**exchange, "at": PAYLOAD}],
                  "prompt_matches": {"result": "differs", "exchange": PAYLOAD, "diff": diff},
                  "reply_matches": {"result": "matches", "exchange": PAYLOAD, "diff": ""}}
    e["archive"]["reason"] = PAYLOAD
    e["archive"]["accepted"] = False  # so the refusal banner (with the reason) is drawn too
    return e


@pytest.fixture
def hostile(sample_packet, reviewer):
    submission = make_submission(sample_packet, name=PAYLOAD, evidence=hostile_evidence())
    GateReceipt.objects.create(invitation=submission.invitation, step="red", accepted=False,
                               refusal=PAYLOAD[:300], local_time=PAYLOAD[:64], log_text=PAYLOAD)
    return submission


def unfold(submission, reviewer, submit=False):
    score(submission, reviewer, {k: v for k, v in ALL_PASS.items() if submit or k != "test_names_bug"}, submit=submit,
          notes={"red_log": PAYLOAD})


def assert_inert(html: str) -> None:
    assert "<script>alert" not in html
    assert "<img src=x" not in html and "<svg onload" not in html
    assert '<b id="injected">' not in html
    assert "javascript:" not in html.replace("javascript:alert(3))", "")  # shown as text inside <pre>, never as a link
    assert 'href="javascript' not in html
    assert "\x1b" not in html and "\x07" not in html


def test_the_review_page_escapes_everything(client, reviewer, hostile):
    unfold(hostile, reviewer)
    client.force_login(reviewer)
    html = client.get(f"/review/{hostile.pk}/").content.decode()
    assert "tests_vs_original" in html  # the diff section is unfolded, so its content is in the page
    assert_inert(html)
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in html
    assert html.count('<b id="injected">') == 0
    assert 'data-event="model exchange 1 (40.0 s)"' in html and 'data-compared="prompt.txt" data-result="differs"' in html


def test_stored_receipts_are_escaped_when_the_evidence_has_none(client, reviewer, hostile):
    # Evidence graded before receipts were part of it: the page lists the stored rows instead.
    from grading.models import Evidence

    evidence = Evidence.objects.get(submission=hostile)
    for key in ("receipts", "gate_log", "notes"):
        evidence.data["timeline"].pop(key)
    evidence.save()
    client.force_login(reviewer)
    html = client.get(f"/review/{hostile.pk}/").content.decode()
    assert_inert(html)
    assert html.count("refused</span>: &lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;") == 2  # red section and list


def test_the_submitted_page_queue_debrief_and_csv_escape_everything(client, reviewer, hostile, sample_packet):
    unfold(hostile, reviewer, submit=True)
    client.force_login(reviewer)
    for url in (f"/review/{hostile.pk}/", "/review/?show=all", f"/review/debrief/{sample_packet.slug}/"):
        assert_inert(client.get(url).content.decode())
    csv_text = b"".join(client.get(f"/review/debrief/{sample_packet.slug}.csv").streaming_content).decode()
    assert "\x1b" not in csv_text and "&lt;script" not in csv_text  # plain text, quoted by the csv module


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_nothing_runs_in_chromium(live_server, page, make_reviewer):
    from takehome.actions import do_load_sample_packet

    packet, _ = do_load_sample_packet()
    reviewer = make_reviewer("rob")
    submission = make_submission(packet, name=PAYLOAD, evidence=hostile_evidence())
    GateReceipt.objects.create(invitation=submission.invitation, step="red", accepted=False, refusal=PAYLOAD[:300])
    other = make_reviewer("ann")
    score(submission, other, ALL_PASS, notes={c: PAYLOAD for c in ALL_PASS})
    unfold(submission, reviewer, submit=True)

    dialogs = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.goto(live_server.url + "/accounts/login/")
    page.fill("#id_username", "rob")
    page.fill("#id_password", "pw-rob")
    page.click("button[type=submit]")
    page.wait_for_url(live_server.url + "/review/")
    for url in (f"/review/{submission.pk}/", "/review/?show=all", f"/review/debrief/{packet.slug}/"):
        page.goto(live_server.url + url)
        page.wait_for_load_state("load")
        page.wait_for_timeout(300)
        assert page.locator("#injected").count() == 0, url
        assert page.locator("img[src=x]").count() == 0, url
        assert page.locator("main script").count() == 0, url
        assert page.locator("a[href^=javascript]").count() == 0, url
    assert dialogs == []
    # And the text is there, as text.
    page.goto(live_server.url + f"/review/{submission.pk}/")
    assert '<script>alert("x")</script>' in page.locator("[data-section=red-log] pre.log").inner_text()
