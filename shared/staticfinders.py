"""The apps' static files as collectstatic gathers them, less what no page of ours loads."""

from fnmatch import fnmatch

from django.contrib.staticfiles import finders

# django-ninja ships ReDoc beside Swagger UI; the API's reference page is Swagger UI, and ReDoc with its
# source map was a third of what collectstatic compressed.
NEVER_LOADED = ("ninja/redoc*",)


class AppDirectoriesFinder(finders.AppDirectoriesFinder):
    """Django's finder of each app's static/ folder; its list (what collectstatic copies) leaves out NEVER_LOADED."""

    def list(self, ignore_patterns):
        for path, storage in super().list(ignore_patterns):
            if not any(fnmatch(path, pattern) for pattern in NEVER_LOADED):
                yield path, storage
