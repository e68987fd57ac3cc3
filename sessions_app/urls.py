from django.urls import path

from . import views

app_name = "sessions_app"

urlpatterns = [
    path("<str:token>/", views.landing, name="landing"),
]
