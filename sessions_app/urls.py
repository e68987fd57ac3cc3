"""The candidate's URLs. A contract that gate.py and scripts rely on: keep the paths."""

from django.urls import path

from . import views
from .hosted import editor as editor_views
from .hosted import views as hosted_views
from .model_window import views as model_views

app_name = "sessions_app"

urlpatterns = [
    path("<str:token>/", views.landing, name="landing"),
    path("<str:token>/start", views.start, name="start"),
    path("<str:token>/download", views.download, name="download"),
    path("<str:token>/gate/<str:step>", views.gate_step, name="gate-step"),
    # The hosted session's page; its terminal is the WebSocket /t/<token>/terminal (takehome/asgi.py).
    path("<str:token>/workspace", views.workspace, name="workspace"),
    path("<str:token>/status", views.status, name="status"),
    path("<str:token>/upload", views.upload, name="upload"),
    path("<str:token>/uploads/<int:pk>", views.submission_detail, name="submission-detail"),
    # The hosted session's gate buttons (the workspace page and its terminal are beside them).
    path("<str:token>/workspace/capture/<str:step>", hosted_views.capture, name="workspace-capture"),
    path("<str:token>/workspace/submit", hosted_views.submit, name="workspace-submit"),
    path("<str:token>/workspace/restart", hosted_views.restart, name="workspace-restart"),
    # After the deadline: the workspace's files, read-only (?path= one of them).
    path("<str:token>/workspace/read-only", hosted_views.workspace_files, name="workspace-read-only"),
    # The workspace page's editor (JSON): the files of the workspace, never outside it.
    path("<str:token>/workspace/files", editor_views.tree, name="workspace-files"),
    path("<str:token>/workspace/files/read", editor_views.read, name="workspace-file-read"),
    path("<str:token>/workspace/files/save", editor_views.save, name="workspace-file-save"),
    path("<str:token>/workspace/files/create", editor_views.create, name="workspace-file-create"),
    path("<str:token>/workspace/files/rename", editor_views.rename, name="workspace-file-rename"),
    # The model window, OpenAI-compatible: a client's base URL is /t/<token>/model/v1.
    path("<str:token>/model/v1/chat/completions", model_views.chat_completions, name="model-chat"),
    path("<str:token>/model/v1/models", model_views.models, name="model-list"),
    # The chat on the candidate's page and in the workspace (htmx parts of either page).
    path("<str:token>/model/chat", views.model_chat, name="model-chat-panel"),
]
