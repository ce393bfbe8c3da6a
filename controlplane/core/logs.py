"""Log records the web process writes: a refusal the caller caused is one line.

Django logs a view's ``PermissionDenied`` (and other 4xx it turns exceptions into) on the
``django.request`` logger *with* the exception, so an expected 403 of a page wrote a 30-line
traceback to daphne.log, burying real errors. A client error is not the server's fault: its
record keeps its message ("Forbidden (Permission denied): /path") and its status, and
drops the traceback. Server errors (5xx) keep theirs.
"""

from __future__ import annotations

import logging


class ClientErrorsOneLine(logging.Filter):
    """Strips the exception of a request's 4xx record (``status_code`` below 500)."""

    def filter(self, record: logging.LogRecord) -> bool:
        status = getattr(record, "status_code", None)
        if isinstance(status, int) and status < 500:
            record.exc_info = None
            record.exc_text = None
        return True
