"""The candidate's URLs. A contract that gate.py and scripts rely on: keep the paths."""

from django.urls import path

from . import model_views, views

app_name = "sessions_app"

urlpatterns = [
    path("<str:token>/", views.landing, name="landing"),
    path("<str:token>/start", views.start, name="start"),
    path("<str:token>/download", views.download, name="download"),
    path("<str:token>/gate/<str:step>", views.gate_step, name="gate-step"),
    path("<str:token>/status", views.status, name="status"),
    path("<str:token>/upload", views.upload, name="upload"),
    # PLACEHOLDER (part C3): part B's workspace page replaces this line and its view at merge.
    path("<str:token>/workspace", views.workspace_placeholder, name="workspace"),
    path("<str:token>/uploads/<int:pk>", views.submission_detail, name="submission-detail"),
    # The model window, OpenAI-compatible: a client's base URL is /t/<token>/model/v1.
    path("<str:token>/model/v1/chat/completions", model_views.chat_completions, name="model-chat"),
    path("<str:token>/model/v1/models", model_views.models, name="model-list"),
]
