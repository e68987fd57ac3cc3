from django.apps import AppConfig


class TakehomeConfig(AppConfig):
    name = "takehome"
    verbose_name = "Recruiting"
