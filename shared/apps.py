from django.apps import AppConfig


class SharedConfig(AppConfig):
    name = "shared"
    verbose_name = "Shared"

    def ready(self) -> None:
        from . import backup
        from .backup import media

        backup.register(media.PART)
