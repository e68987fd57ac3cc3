"""Project URLs. Each app owns its own namespace."""

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path, re_path

from api import endpoints as api_endpoints
from grading import views as grading_views

from . import views
from .sso import views as sso_views

# An outage met outside a view (see takehome/unavailable.py) is a 503 too; anything else, Django's 500.
handler500 = "takehome.unavailable.server_error"

recruiter_patterns = [
    path("", views.packet_list, name="packet-list"),
    path("new/", views.packet_create, name="packet-create"),
    path("import/", views.packet_import, name="packet-import"),
    path("<slug:slug>/", views.packet_detail, name="packet-detail"),
    path("<slug:slug>/edit/", views.packet_edit, name="packet-edit"),
    path("<slug:slug>/check", views.packet_check, name="packet-check"),
    path("<slug:slug>/export", views.packet_export, name="packet-export"),
    path("<slug:slug>/invite/", views.packet_invite, name="packet-invite"),
    path("<slug:slug>/invitations/", views.invitation_board, name="invitation-board"),
    path("<slug:slug>/candidate-names", views.packet_candidate_names, name="packet-candidate-names"),
    path("<slug:slug>/reminders", views.packet_reminders, name="packet-reminders"),
    path("<slug:slug>/reviewers", views.packet_reviewers, name="packet-reviewers"),
    path("invitations/<int:pk>/", views.invitation_on_board, name="invitation-on-board"),
    path("invitations/<int:pk>/resend", views.invitation_resend, name="invitation-resend"),
    path("invitations/<int:pk>/revoke", views.invitation_revoke, name="invitation-revoke"),
    path("invitations/<int:pk>/extend", views.invitation_extend, name="invitation-extend"),
    path("invitations/<int:pk>/decide", views.invitation_decide, name="invitation-decide"),
]

# A person across every packet (the recruiter's): the search, and one person's page.
candidate_patterns = [
    path("", views.candidate_search, name="search"),
    path("<int:pk>/", views.candidate_detail, name="detail"),
]

urlpatterns = [
    path("", views.home, name="home"),
    path("favicon.ico", views.favicon, name="favicon"),
    path("accounts/login/", sso_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", sso_views.LogoutView.as_view(), name="logout"),
    # Single sign-on (takehome/sso/): the provider is sent the callback's address as the redirect URI.
    path("accounts/sso/login/", sso_views.SignOnStart.as_view(), name="sso-login"),
    path("accounts/sso/callback/", sso_views.sign_on_callback, name="sso-callback"),
    # A new member's invitation link (and a staff-sent one) lands on Django's own set-password views.
    path("accounts/set-password/<uidb64>/<token>/", auth_views.PasswordResetConfirmView.as_view(),
         name="password_reset_confirm"),
    path("accounts/set-password/done/", auth_views.PasswordResetCompleteView.as_view(),
         name="password_reset_complete"),
    path("team/", include("takehome.team.urls")),
    path("packets/", include((recruiter_patterns, "takehome"))),
    path("candidates/", include((candidate_patterns, "candidates"))),
    path("t/", include("sessions_app.urls")),
    path("review/", include("grading.urls")),
    # The REST API (its schema at api/v1/openapi.json, its reference at api/v1/docs); any other address
    # under it answers 404 in the API's error shape. The account page (tokens) and the webhooks page.
    path("api/v1/", api_endpoints.urls()),
    re_path(r"^api/v1/(?P<rest>.*)$", api_endpoints.not_found_view),
    path("", include("api.urls")),
    # Before the admin's own: with password login off, its login form is this site's login page.
    path("admin/login/", sso_views.admin_login),
    path("admin/", admin.site.urls),
    # For Prometheus, with a bearer token (TAKEHOME_METRICS_TOKEN); a 404 while none is set.
    path("metrics", grading_views.metrics, name="metrics"),
]
