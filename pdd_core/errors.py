"""The root of every error ``pdd_core`` raises on purpose: ``PddError``.

Each module's error says what went wrong in its own terms (``SpecError``, ``ProtocolError``,
``TraceFormatError``, ...) and derives from ``PddError``, so a caller that maps the library's
failures (the ``pdd`` command line to exit code 2, the control plane's API to its 400
envelope) catches one class instead of a list that drifts. Errors about malformed input also
stay ``ValueError``s, as callers that predate the root expect.
"""

from __future__ import annotations


class PddError(Exception):
    """A failure ``pdd_core`` raises on purpose, with a message meant for whoever supplied the
    input or runs the process."""
