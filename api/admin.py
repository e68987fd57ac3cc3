"""The operators' view of the API: every token (revocable here, as on its owner's account page) and every
webhook endpoint with its deliveries. Read-only otherwise: tokens are made by their owners, endpoints on the
webhooks page, so each change is audited where it is made."""

from django.contrib import admin, messages
from django.urls import reverse
from django.utils.html import format_html

from shared.admin import ChangedInTheApp, ReadOnlyAdmin

from . import actions
from .models import ApiToken, WebhookDelivery, WebhookEndpoint


@admin.register(ApiToken)
class ApiTokenAdmin(ChangedInTheApp, ReadOnlyAdmin):
    list_display = ("prefix", "name", "user", "scope", "created_at", "last_used_at", "revoked_at")
    list_filter = ("scope", ("revoked_at", admin.EmptyFieldListFilter))
    list_select_related = ("user",)
    search_fields = ("prefix", "name", "user__username", "user__email")
    exclude = ("token_hash",)
    actions = ["revoke"]

    @admin.action(description="Revoke the selected tokens", permissions=["revoke"])
    def revoke(self, request, queryset):
        revoked = sum(actions.do_revoke_token(token, request.user) for token in queryset)
        self.message_user(request, f"{revoked} token{'s' if revoked != 1 else ''} revoked "
                                   f"({queryset.count() - revoked} already revoked).", messages.SUCCESS)

    def has_revoke_permission(self, request):
        return request.user.has_perm("api.change_apitoken")

    def changed_in_the_app(self, request, obj=None):
        return format_html('A token is made and revoked by its owner on their <a href="{}">Account</a> page; here '
                           "any can be revoked (the action), recorded in the audit trail as there.",
                           reverse("api:account"))


class ChangedOnTheWebhooksPage(ChangedInTheApp):
    def changed_in_the_app(self, request, obj=None):
        return format_html('Endpoints are added, tested and removed on the <a href="{}">Webhooks</a> page, where '
                           "each change is recorded in the audit trail; the admin only shows them.",
                           reverse("api:webhook-list"))


class DeliveryInline(admin.TabularInline):
    model = WebhookDelivery
    fields = ("event", "event_id", "status", "created_at", "finished_at", "attempts")
    readonly_fields = fields
    extra = 0
    max_num = 0
    can_delete = False
    ordering = ("-created_at",)


@admin.register(WebhookEndpoint)
class WebhookEndpointAdmin(ChangedOnTheWebhooksPage, ReadOnlyAdmin):
    list_display = ("url", "description", "events", "created_by", "created_at")
    search_fields = ("url", "description")
    exclude = ("secret",)  # why: the signing secret is shown once, to whoever registered the endpoint
    inlines = [DeliveryInline]


@admin.register(WebhookDelivery)
class WebhookDeliveryAdmin(ChangedOnTheWebhooksPage, ReadOnlyAdmin):
    list_display = ("event", "endpoint", "status", "created_at", "sent_at", "finished_at")
    list_filter = ("status", "event")
    list_select_related = ("endpoint",)
    search_fields = ("event_id", "endpoint__url")
    show_full_result_count = False  # why: deliveries grow with every event
