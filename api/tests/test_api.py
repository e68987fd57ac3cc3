"""The REST API through Django's test client: tokens (hashed, scoped, revoked refused, audited), the access
rules of the pages, the endpoints' answers, the rate limit, and one error shape for every refusal."""

from __future__ import annotations

import hashlib

import pytest

from api.endpoints import DecisionIn
from api.models import ApiToken
from grading.actions import do_save_mark, do_submit_review
from grading.models import Cell
from sessions_app.models import Submission
from takehome.actions import do_decide, do_revoke_invitation
from takehome.models import AuditEvent, Decision, Invitation

pytestmark = pytest.mark.django_db


def call(client, method: str, path: str, token: str | None = None, **kwargs):
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return getattr(client, method)("/api/v1" + path, headers=headers, content_type="application/json", **kwargs)


def assert_error(response, status: int, code: str) -> dict:
    assert response.status_code == status, response.content
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message", "details"}, body
    assert body["error"]["code"] == code and body["error"]["message"], body
    return body["error"]


def api_calls(token_prefix: str = "") -> list[AuditEvent]:
    return list(AuditEvent.objects.filter(action="api_call", target_repr__contains=token_prefix).order_by("pk"))


def test_a_token_is_stored_as_its_hash_with_a_visible_prefix(recruiter, make_token):
    raw = make_token(recruiter, "read", name="Greenhouse")
    token = ApiToken.objects.get()
    assert raw.startswith("thk_") and len(raw) > 40
    assert token.token_hash == hashlib.sha256(raw.encode()).hexdigest()
    assert token.prefix == raw[:12] and raw not in {token.prefix, token.name, token.token_hash}
    event = AuditEvent.objects.get(action="api_token_created")
    assert event.actor == recruiter and "Greenhouse" in event.detail and raw not in event.detail
    assert event.get_action_display() == "API token created"


def test_every_use_is_audited_and_sets_last_used(client, recruiter, sample_packet, make_token):
    raw = make_token(recruiter, "read")
    assert ApiToken.objects.get().last_used_at is None
    for _ in range(3):
        assert call(client, "get", "/packets", raw).status_code == 200
    events = api_calls()
    assert [e.detail for e in events] == ["GET /api/v1/packets"] * 3
    assert all(e.actor == recruiter and e.target_type == "api.apitoken" for e in events)
    assert ApiToken.objects.get().last_used_at is not None


def test_a_read_token_reads_and_may_not_write(client, recruiter, sample_packet, make_token):
    raw = make_token(recruiter, "read")
    packets = call(client, "get", "/packets", raw).json()
    assert packets == [{"slug": sample_packet.slug, "title": sample_packet.title, "latest_version": 1,
                        "invitable_version": 1}]
    refused = call(client, "post", "/invitations", raw,
                   data={"packet": sample_packet.slug, "candidates": [{"name": "Ada", "email": "ada@example.com"}]})
    assert_error(refused, 403, "read_only_token")
    assert not Invitation.objects.exists()
    assert "refused, the token is read-only" in api_calls()[-1].detail


def test_a_revoked_token_is_refused_and_the_refusal_audited(client, recruiter, sample_packet, make_token):
    from api.actions import do_revoke_token

    raw = make_token(recruiter)
    token = ApiToken.objects.get()
    assert do_revoke_token(token, recruiter) is True
    assert do_revoke_token(token, recruiter) is False  # once
    assert_error(call(client, "get", "/packets", raw), 401, "token_revoked")
    assert "refused, the token is revoked" in api_calls()[-1].detail
    assert AuditEvent.objects.filter(action="api_token_revoked").count() == 1


@pytest.mark.parametrize("header, code", [
    (None, "missing_token"),
    ("Bearer thk_not-a-token", "invalid_token"),
    ("Bearer something-else", "invalid_token"),
])
def test_no_or_an_unknown_token_is_401(client, db, header, code):
    headers = {"Authorization": header} if header else {}
    assert_error(client.get("/api/v1/packets", headers=headers), 401, code)


def test_a_deactivated_account_s_token_is_refused(client, recruiter, make_token):
    raw = make_token(recruiter)
    recruiter.is_active = False
    recruiter.save()
    assert_error(call(client, "get", "/packets", raw), 401, "account_inactive")


def test_the_pages_roles_hold(client, reviewer, invitation, make_token):
    raw = make_token(reviewer)
    assert call(client, "get", "/packets", raw).status_code == 200  # reviewers see every packet's debrief
    assert_error(call(client, "get", f"/invitations/{invitation.pk}", raw), 403, "forbidden")
    assert_error(call(client, "post", f"/invitations/{invitation.pk}/decision", raw, data={"choice": "advance"}),
                 403, "forbidden")
    assert not Decision.objects.exists()


def test_create_invitations_returns_working_links_and_audits_each(client, recruiter, sample_packet, make_token,
                                                                  mailoutbox):
    raw = make_token(recruiter)
    people = [{"name": f"Person {i}", "email": f"p{i}@example.com"} for i in range(3)]
    response = call(client, "post", "/invitations", raw, data={"packet": sample_packet.slug, "candidates": people})
    assert response.status_code == 201, response.content
    created = response.json()
    assert [c["candidate"] for c in created] == people
    for row in created:
        token = row["link"].rstrip("/").rsplit("/", 1)[-1]
        assert Invitation.objects.by_token(token).pk == row["id"]
    assert AuditEvent.objects.filter(action="invite", actor=recruiter).count() == 3
    assert mailoutbox == []  # send_email defaults to false


def test_create_invitations_refuses_all_with_a_bad_row_or_a_duplicate(client, recruiter, invitation, make_token):
    raw = make_token(recruiter)
    slug = invitation.packet.slug
    bad = call(client, "post", "/invitations", raw, data={"packet": slug, "candidates": [
        {"name": "Ok", "email": "ok@example.com"}, {"name": "Bad", "email": "not-an-email"},
        {"name": "Twice", "email": "OK@example.com"}]})
    error = assert_error(bad, 422, "invalid_candidates")
    assert [d["where"] for d in error["details"]] == ["candidates.1", "candidates.2"]
    again = call(client, "post", "/invitations", raw, data={"packet": slug, "candidates": [
        {"name": "New", "email": "new@example.com"}, {"name": "Same", "email": invitation.candidate.email}]})
    error = assert_error(again, 409, "not_invited")
    assert invitation.candidate.email in error["details"][0]["message"]
    assert Invitation.objects.count() == 1


@pytest.mark.parametrize("method, path, body, status, code", [
    ("post", "/invitations", {"packet": "refund-sum"}, 422, "invalid_input"),
    ("post", "/invitations", {"packet": "refund-sum", "candidates": []}, 422, "invalid_input"),
    ("post", "/invitations", {"packet": "no-such", "candidates": [{"name": "A", "email": "a@example.com"}]},
     404, "not_found"),
    ("get", "/invitations/999999", None, 404, "not_found"),
    ("get", "/no-such-endpoint", None, 404, "not_found"),
    ("post", "/invitations/1/decision", {"choice": "maybe"}, 422, "invalid_input"),
    ("get", "/invitations/abc", None, 422, "invalid_input"),
    ("get", "/invitations", None, 405, "method_not_allowed"),
    ("delete", "/packets", None, 405, "method_not_allowed"),
])
def test_errors_have_one_shape(client, recruiter, sample_packet, make_token, method, path, body, status, code):
    raw = make_token(recruiter)
    kwargs = {"data": body} if body is not None else {}
    assert_error(call(client, method, path, raw, **kwargs), status, code)


def test_a_body_that_is_not_json_is_400_in_the_same_shape(client, recruiter, sample_packet, make_token):
    raw = make_token(recruiter)
    response = client.post("/api/v1/invitations", data=b"{not json", content_type="application/json",
                           headers={"Authorization": f"Bearer {raw}"})
    assert_error(response, 400, "bad_request")


def test_read_an_invitation_with_its_outcome_reviews_and_decision(client, recruiter, reviewer, invitation,
                                                                   make_token):
    submission = Submission.objects.create(invitation=invitation, archive="uploads/x.zip", sha256="a" * 64, size=1,
                                           status=Submission.Status.GRADED)
    for cell in Cell.values:
        do_save_mark(submission, reviewer, cell, passed=cell != Cell.values[0], note=f"note {cell}")
    do_submit_review(submission, reviewer)
    do_decide(invitation, "advance", "Strong red log", recruiter)
    raw = make_token(recruiter, "read")
    state = call(client, "get", f"/invitations/{invitation.pk}", raw).json()
    assert state["id"] == invitation.pk and state["packet"] == invitation.packet.slug
    assert state["candidate"] == {"name": invitation.candidate.name, "email": invitation.candidate.email}
    assert state["outcome"]["submission_id"] == submission.pk and state["outcome"]["status"] == "graded"
    assert state["outcome"]["reviews_submitted"] == 1
    (review,) = state["reviews"]
    assert review["reviewer"] == "rob" and set(review["marks"]) == set(Cell.values)
    assert review["marks"][Cell.values[0]] == {"passed": False, "note": f"note {Cell.values[0]}"}
    assert state["decision"]["choice"] == "advance" and state["decision"]["decided_by"] == "rita"


def test_record_a_decision_through_the_action_of_the_board(client, recruiter, invitation, make_token):
    raw = make_token(recruiter)
    response = call(client, "post", f"/invitations/{invitation.pk}/decision", raw,
                    data={"choice": "decline", "note": "No refusal"})
    assert response.status_code == 200, response.content
    assert response.json()["decision"]["choice"] == "decline"
    decision = Decision.objects.get(invitation=invitation)
    assert (decision.choice, decision.note, decision.decided_by) == ("decline", "No refusal", recruiter)
    assert AuditEvent.objects.filter(action="decision", invitation=invitation, actor=recruiter).exists()
    do_revoke_invitation(invitation, recruiter)
    refused = call(client, "post", f"/invitations/{invitation.pk}/decision", raw, data={"choice": "advance"})
    assert_error(refused, 409, "no_decision")
    assert Decision.objects.get(invitation=invitation).choice == "decline"


def test_the_decision_schema_offers_the_decision_choices():
    assert set(DecisionIn.model_json_schema()["properties"]["choice"]["enum"]) == set(Decision.Choice.values)


def test_the_rate_limit_answers_429_with_retry_after_per_token(client, recruiter, sample_packet, make_token,
                                                               settings, held_minute):
    settings.API_REQUESTS_PER_MINUTE = 3
    first, second = make_token(recruiter), make_token(recruiter)
    assert [call(client, "get", "/packets", first).status_code for _ in range(3)] == [200] * 3
    over = call(client, "get", "/packets", first)
    assert_error(over, 429, "rate_limited")
    assert 1 <= int(over["Retry-After"]) <= 60
    assert call(client, "get", "/packets", second).status_code == 200  # each token its own count
    assert len(api_calls()) == 4  # the refused one did no work and is not a use


def test_the_schema_and_its_reference_are_served(client, db):
    schema = client.get("/api/v1/openapi.json").json()
    assert {"/api/v1/packets", "/api/v1/invitations", "/api/v1/invitations/{invitation_id}",
            "/api/v1/invitations/{invitation_id}/decision"} <= set(schema["paths"])
    assert schema["components"]["securitySchemes"]["TokenAuth"]["scheme"] == "bearer"
    docs = client.get("/api/v1/docs")
    assert docs.status_code == 200 and b"swagger-ui" in docs.content


def test_the_docs_table_of_endpoints_is_made_from_the_schema():
    import importlib.util
    from pathlib import Path

    from api.endpoints import api

    path = Path(__file__).resolve().parents[2] / "docs" / "hooks" / "openapi_schema.py"
    spec = importlib.util.spec_from_file_location("openapi_schema_hook", path)
    hook = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hook)
    table = hook.endpoints_table(api.get_openapi_schema())
    assert "| `POST /api/v1/invitations` | write | Invite one or many candidates" in table
    assert "| `GET /api/v1/packets` | read |" in table and len(table.splitlines()) == 2 + 4
