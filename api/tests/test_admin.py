"""The admin lists the API's tokens, endpoints and deliveries, and the assignments and line comments, and
changes none of them but for revoking tokens, audited as the account page's revocation is."""

import pytest
from django.contrib.auth.models import User

from api.actions import do_register_endpoint, do_send_test_event
from api.models import ApiToken, WebhookEndpoint
from takehome.models import AuditEvent

pytestmark = pytest.mark.django_db


@pytest.fixture
def ops_client(client, groups):
    client.force_login(User.objects.create_superuser("ops", email="ops@example.com", password="pw-ops"))
    return client


def test_the_lists_show_and_never_offer_to_add_change_or_delete(ops_client, recruiter, make_token, settings):
    settings.WEBHOOK_ALLOW_PRIVATE = True
    make_token(recruiter, name="ATS sync")
    new = do_register_endpoint("http://127.0.0.1:9/hook", ["submission.graded"], "ATS", recruiter)
    do_send_test_event(new.endpoint, recruiter)
    for model, shows in [("api/apitoken", "ATS sync"), ("api/webhookendpoint", "http://127.0.0.1:9/hook"),
                         ("api/webhookdelivery", "ping"), ("grading/assignment", ""), ("grading/linecomment", "")]:
        page = ops_client.get(f"/admin/{model}/")
        assert page.status_code == 200, model
        html = page.content.decode()
        assert shows in html and f'href="/admin/{model}/add/"' not in html, model
        assert "recorded in the audit trail" in html or "The admin only shows them" in html, model  # says where
    detail = ops_client.get(f"/admin/api/webhookendpoint/{new.endpoint.pk}/change/").content.decode()
    assert new.secret not in detail and "ping" in detail  # the secret never; the deliveries inline
    assert 'href="/webhooks/"' in detail  # where endpoints are changed
    token = ApiToken.objects.get()
    assert token.token_hash not in ops_client.get(f"/admin/api/apitoken/{token.pk}/change/").content.decode()
    assert ops_client.post(f"/admin/api/webhookendpoint/{new.endpoint.pk}/delete/", {"post": "yes"}).status_code == 403
    assert WebhookEndpoint.objects.exists()


def test_revoking_tokens_in_the_admin_is_audited_and_a_second_time_does_nothing(ops_client, recruiter, make_token):
    make_token(recruiter, name="one")
    make_token(recruiter, name="two")
    ids = [str(pk) for pk in ApiToken.objects.values_list("pk", flat=True)]
    done = ops_client.post("/admin/api/apitoken/", {"action": "revoke", "_selected_action": ids}, follow=True)
    assert "2 tokens revoked (0 already revoked)." in done.content.decode()
    assert not ApiToken.objects.filter(revoked_at__isnull=True).exists()
    assert AuditEvent.objects.filter(action="api_token_revoked", actor_name="ops").count() == 2
    again = ops_client.post("/admin/api/apitoken/", {"action": "revoke", "_selected_action": ids[:1]}, follow=True)
    assert "0 tokens revoked (1 already revoked)." in again.content.decode()
    assert AuditEvent.objects.filter(action="api_token_revoked").count() == 2
