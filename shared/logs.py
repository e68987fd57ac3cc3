"""Logging filters of the project."""

import logging


class NoTracebackForClientErrors(logging.Filter):
    """A 4xx answer (a 403 to the wrong role, a 404) logs one line, not a traceback that reads like a crash.

    Django logs "Forbidden (Permission denied): /team/" with the exception
    attached; the answer was right, so the traceback is noise. 5xx keep theirs.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        status = getattr(record, "status_code", None)
        if status is not None and status < 500:
            record.exc_info = None
            record.exc_text = None
        return True
