"""Django choices of the enums several apps store, with their values taken from ``pdd_core``.

Telemetry stores the pipeline and handoff mode of each request and billing the pipeline of each
usage record; both use these, so neither app imports the other for them. The values are
``pdd_core.routing``'s (what agents report); a test keeps them equal.
"""

from __future__ import annotations

from django.db import models

from pdd_core import routing


class Pipeline(models.TextChoices):
    """The three routes of PDD (``pdd_core.routing.Pipeline``; the baselines are never served)."""

    P_MD = routing.Pipeline.P_MD.value, "Prefill -> Main-Decode"
    P_RLD_MD = routing.Pipeline.P_RLD_MD.value, "Prefill -> Relay-Decode -> Main-Decode"
    P_RLD = routing.Pipeline.P_RLD.value, "Prefill -> Relay-Decode (served in the prefill site)"


class HandoffMode(models.TextChoices):
    """``pdd_core.routing.HandoffMode``, with "none" stored blank."""

    NONE = "", "No handoff"
    ONE_SHOT = routing.HandoffMode.ONE_SHOT.value, "One-shot handoff"
    EXTEND_DECODE = routing.HandoffMode.EXTEND_DECODE.value, "Extend-decode handoff"
