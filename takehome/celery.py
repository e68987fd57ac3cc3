"""The Celery app. Configuration comes from Django's settings (CELERY_*)."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "takehome.settings")

app = Celery("takehome")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
