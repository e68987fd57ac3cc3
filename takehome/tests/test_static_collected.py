"""What collectstatic gathers and compresses for a deployment: every file a page loads, nothing no page loads."""

from django.apps import apps
from django.conf import settings
from django.contrib.staticfiles.finders import get_finders
from whitenoise.compress import Compressor


def collected() -> set[str]:
    """The paths collectstatic copies, found as it finds them (its ignore patterns are the app config's)."""
    ignore = apps.get_app_config("staticfiles").ignore_patterns
    return {path for finder in get_finders() for path, _ in finder.list(ignore)}


def test_the_api_reference_is_collected_and_redoc_which_no_page_loads_is_not():
    paths = collected()
    assert {"ninja/swagger-ui-bundle.js", "ninja/swagger-ui.css", "ninja/swagger-ui-init.js"} <= paths
    assert {"vendor/xterm/xterm.js", "vendor/codemirror/codemirror.js"} <= paths
    assert not [p for p in paths if p.startswith("ninja/redoc")]


def test_scripts_and_styles_are_compressed_and_source_maps_are_not():
    compressor = Compressor(extensions=settings.WHITENOISE_SKIP_COMPRESS_EXTENSIONS, quiet=True)
    assert compressor.should_compress("vendor/xterm/xterm.js") and compressor.should_compress("css/site.css")
    assert not compressor.should_compress("ninja/swagger-ui-bundle.js.map")
