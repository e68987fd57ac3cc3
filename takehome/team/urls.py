from django.urls import path

from . import views

app_name = "team"

urlpatterns = [
    path("", views.team_list, name="list"),
    path("invite", views.team_invite, name="invite"),
    path("<int:pk>/roles", views.member_roles, name="member-roles"),
    path("<int:pk>/deactivate", views.member_deactivate, name="member-deactivate"),
    path("<int:pk>/reactivate", views.member_reactivate, name="member-reactivate"),
    path("<int:pk>/send-link", views.member_send_link, name="member-send-link"),
]
