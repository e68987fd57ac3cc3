"""The Celery app. Configuration comes from Django's settings (CELERY_*)."""

import logging.config
import os

from celery import Celery
from celery.signals import setup_logging

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "takehome.settings")

app = Celery("takehome")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@setup_logging.connect
def use_the_settings_logging(**kwargs) -> None:
    """The worker and beat log as the web server does (settings.LOGGING), whatever their --loglevel says.

    why: with no receiver of this signal, Celery replaces the root logger's
    handlers with its own, in its own format, without the time zone, the
    logger's name or a JSON form.
    """
    from django.conf import settings

    logging.config.dictConfig(settings.LOGGING)
