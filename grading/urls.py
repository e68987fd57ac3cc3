"""The reviewer's URLs, mounted at /review/ (scripts rely on these paths)."""

from django.urls import path

from . import views

app_name = "grading"

urlpatterns = [
    path("", views.queue, name="queue"),
    path("<int:pk>/", views.review_detail, name="review-detail"),
    path("<int:pk>/session.cast", views.session_cast, name="session-cast"),
    path("<int:pk>/mark/<str:cell>/", views.mark_update, name="mark-update"),
    path("<int:pk>/submit/", views.review_submit, name="review-submit"),
    path("<int:pk>/assign/", views.assignment_update, name="assignment-update"),
    path("<int:pk>/comment/", views.comment_form, name="comment-form"),
    path("<int:pk>/comment/save/", views.comment_save, name="comment-save"),
    path("debrief/", views.debrief_list, name="debrief-list"),
    path("debrief/<slug:slug>/", views.debrief, name="debrief-detail"),
    path("debrief/<slug:slug>.csv", views.debrief_csv, name="debrief-csv"),
]
