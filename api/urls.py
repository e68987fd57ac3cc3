"""The account page, the webhooks page, and the API under /api/v1/ (wired in takehome.urls)."""

from django.urls import path

from . import views

app_name = "api"

urlpatterns = [
    path("account/", views.account, name="account"),
    path("account/tokens/new", views.token_create, name="token-create"),
    path("account/tokens/<int:pk>/revoke", views.token_revoke, name="token-revoke"),
    path("webhooks/", views.webhook_list, name="webhook-list"),
    path("webhooks/new", views.webhook_create, name="webhook-create"),
    path("webhooks/<int:pk>/test", views.webhook_test, name="webhook-test"),
    path("webhooks/<int:pk>/remove", views.webhook_remove, name="webhook-remove"),
]
