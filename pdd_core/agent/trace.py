"""Request milestones, for tracing one request's timeline across the live plane's processes.

With ``PDD_TRACE=1`` in its environment every agent logs ``trace <request id> <milestone>
<unix time>`` lines (logger ``pdd.trace``, at INFO whatever the agent's log level) at the
points a request passes: the gateway receives it, has its tokens, routes it, sends GENERATE,
delivers its first token; P takes it into a prefill batch, ends the pass, gets MD's
``KV_HAVE``, has written its KV; RLD and MD hold the prefill KV and emit their first token.
All processes of a ``pdd up`` plane share one machine clock, so ``read_marks`` joins the
lines of every log into one timeline per request (``pdd parity --trace`` prints one beside
the simulator's). Off by default: a line per milestone is not free.
"""

from __future__ import annotations

import logging
import os
import re
import time
from collections.abc import Iterable
from pathlib import Path

ENV = "PDD_TRACE"
log = logging.getLogger("pdd.trace")
ENABLED = os.environ.get(ENV, "") not in ("", "0")
if ENABLED:
    log.setLevel(logging.INFO)
LINE = re.compile(r"\btrace (\S+) (\S+) (\d+\.\d+)")


def mark(request_id: str, milestone: str, at: float | None = None) -> None:
    """Log that ``request_id`` reached ``milestone`` (now, or at unix time ``at``)."""
    if ENABLED:
        log.info("trace %s %s %.6f", request_id, milestone, time.time() if at is None else at)


def read_marks(logs: Iterable[Path]) -> dict[str, dict[str, float]]:
    """Every request's milestones from agent logs: request id -> milestone -> unix time (the
    first time a milestone was reached; a resumed attempt ``<id>.r1`` counts as its request)."""
    marks: dict[str, dict[str, float]] = {}
    for path in logs:
        with path.open(errors="replace") as lines:
            for line in lines:
                found = LINE.search(line)
                if found is None:
                    continue
                rid, milestone, at = found.group(1), found.group(2), float(found.group(3))
                request = marks.setdefault(rid.split(".r")[0], {})
                request.setdefault(milestone, at)
    return marks
