"""Per-request routing decisions of PDD: pipeline, handoff mode, instance, early rejection.

DOMAIN.md section 6 lists what the router decides for each request: singular traffic goes to
P-RLD only; a request whose prefill plus predicted WAN transfer fits the budget goes P-MD; the
rest go P-RLD-MD, with a one-shot or extend-decode handoff chosen from RLD's load. Mooncake-style
admission rejects early (HTTP 429) when the predicted TTFT cannot meet the SLA.

The simulator and the live gateway both import this module, so it holds decisions only: plain
immutable values in, plain immutable values (or enums) out, no clocks, no I/O, no state. The
ones made per request (``RouteFeatures``, ``PipelineDecision``, ``InstanceView``) are named tuples,
which cost a fraction of a frozen dataclass to build; the rest are frozen dataclasses.
Predictions (prefill time, transfer time, queue time) are computed by the caller from
``pdd_core.perf`` and ``pdd_core.transfer`` and passed in, so the router never re-derives physics.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields, replace
from enum import StrEnum
from typing import Any, NamedTuple

from pdd_core.metrics import hit_ratio
from pdd_core.specs import SLA


class Pipeline(StrEnum):
    """The path a request takes through the roles.

    ``P-MD``, ``P-RLD-MD`` and ``P-RLD`` (singular only) are PDD's (DOMAIN.md section 4);
    ``P-D`` is classic disaggregation (same-dc and naive cross-dc baselines); ``colocated`` is
    prefill and decode on one instance.
    """

    P_MD = "P-MD"
    P_RLD_MD = "P-RLD-MD"
    P_RLD = "P-RLD"
    P_D = "P-D"
    COLOCATED = "colocated"


class HandoffMode(StrEnum):
    """How RLD hands a relayed request to MD (DOMAIN.md section 4, "two handoff modes")."""

    NONE = "none"
    ONE_SHOT = "one-shot"
    EXTEND_DECODE = "extend-decode"


@dataclass(frozen=True, slots=True)
class RoutingTable:
    """The thresholds the planner tunes and the control plane pushes to gateways.

    - ``singular_*``: a request is singular (finished on RLD, no WAN transfer) when its input
      is at least ``singular_min_input_tokens``, its predicted output below
      ``singular_max_output_tokens`` (DOMAIN.md: about 500) and its hit at P at most
      ``singular_max_hit``.
    - ``transfer_budget_s``: the largest predicted WAN transfer time of the request's missing
      KV for which it goes P-MD; above it the transfer would show in TTFT, so RLD relays.
    - ``handoff_chunk_tokens``: tokens per extend chunk in extend-decode handoff.
    - ``extend_decode_min_tokens``: hand over more than this many eager tokens to consider
      extend-decode (DOMAIN.md's "for example 64"); at or below it one extend is one step.
    - ``rld_load_threshold``: RLD load (0-1) at or above which handoff is one-shot, freeing RLD.
    - ``early_rejection`` and ``reject_ttft_factor``: reject when the predicted TTFT exceeds
      ``reject_ttft_factor x SLA.ttft_p99_s``.
    """

    singular_min_input_tokens: int = 32_768
    singular_max_output_tokens: int = 500
    singular_max_hit: float = 0.5
    transfer_budget_s: float = 1.0
    handoff_chunk_tokens: int = 64
    extend_decode_min_tokens: int = 64
    rld_load_threshold: float = 0.7
    early_rejection: bool = True
    reject_ttft_factor: float = 1.0

    def __post_init__(self) -> None:
        for name in (
            "singular_min_input_tokens",
            "singular_max_output_tokens",
            "handoff_chunk_tokens",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name}: must be a positive integer, got {value!r}")
        if self.extend_decode_min_tokens < 0:
            raise ValueError("extend_decode_min_tokens: must be non-negative")
        for name in ("singular_max_hit", "rld_load_threshold"):
            value = getattr(self, name)
            if not 0 <= value <= 1:
                raise ValueError(f"{name}: must be in [0, 1], got {value!r}")
        if not self.transfer_budget_s >= 0:
            raise ValueError("transfer_budget_s: must be non-negative")
        if not self.reject_ttft_factor > 0:
            raise ValueError("reject_ttft_factor: must be positive")


def with_overrides(
    table: RoutingTable, overrides: Mapping[str, Any]
) -> tuple[RoutingTable, list[str]]:
    """``table`` with the known fields of ``overrides`` replaced, and the unknown keys sorted.

    Pushed configurations may come from a newer control plane, so unknown keys are returned
    for the caller to log, not rejected; bad values raise ``ValueError`` as construction does.
    """
    known = {f.name for f in fields(RoutingTable)}
    unknown = sorted(set(overrides) - known)
    try:
        updated = replace(table, **{k: v for k, v in overrides.items() if k in known})
    except TypeError as exc:
        raise ValueError(str(exc)) from None
    return updated, unknown


class RouteFeatures(NamedTuple):
    """What the router knows of one request when it arrives.

    ``predicted_output_tokens`` comes from the client's ``max_tokens`` or an estimator (the
    simulator uses the trace's value). ``wan_transfer_s`` is the predicted time to move the KV
    MD lacks (after its DRC hit) over the WAN at the line's current fair share.
    """

    input_tokens: int
    hit_tokens_p: int
    hit_tokens_md: int
    predicted_output_tokens: int
    wan_transfer_s: float


class PipelineDecision(NamedTuple):
    """The chosen pipeline and a short reason an operator can read in a record."""

    pipeline: Pipeline
    reason: str


def is_singular(features: RouteFeatures, table: RoutingTable) -> bool:
    """Ultra-long input, ultra-short output, low hit: the traffic of DOMAIN.md section 4 that
    would saturate the line for almost no decode work."""
    hit = hit_ratio(features.hit_tokens_p, features.input_tokens)
    return (
        features.input_tokens >= table.singular_min_input_tokens
        and features.predicted_output_tokens < table.singular_max_output_tokens
        and hit <= table.singular_max_hit
    )


# ``choose_pipeline``'s three answers, built once (they are immutable, and it runs per request).
_SINGULAR = PipelineDecision(Pipeline.P_RLD, "singular: long input, short output, low hit")
_WITHIN_BUDGET = PipelineDecision(Pipeline.P_MD, "predicted WAN transfer within budget")
_OVER_BUDGET = PipelineDecision(Pipeline.P_RLD_MD, "predicted WAN transfer over budget: relay")


def choose_pipeline(features: RouteFeatures, table: RoutingTable) -> PipelineDecision:
    """DOMAIN.md section 6: singular -> P-RLD; transfer within budget -> P-MD; else P-RLD-MD."""
    if is_singular(features, table):
        return _SINGULAR
    if features.wan_transfer_s <= table.transfer_budget_s:
        return _WITHIN_BUDGET
    return _OVER_BUDGET


def choose_handoff_mode(
    tokens_to_hand_over: int, rld_load: float, table: RoutingTable
) -> HandoffMode:
    """One-shot under high RLD load or for few tokens; extend-decode otherwise (section 4).

    ``rld_load`` is the relay instance's occupancy in [0, 1] (running sequences over its batch
    limit, or KV in use over capacity, whichever is higher).
    """
    if tokens_to_hand_over <= table.extend_decode_min_tokens:
        return HandoffMode.ONE_SHOT
    if rld_load >= table.rld_load_threshold:
        return HandoffMode.ONE_SHOT
    return HandoffMode.EXTEND_DECODE


class InstanceView(NamedTuple):
    """One candidate instance as the router sees it (a named tuple: the router builds one per
    candidate and request).

    ``cached_tokens`` is the request's prefix hit on that instance's cache; ``queue_s`` the
    predicted wait before it starts; ``service_s`` the predicted time of this request's work
    there given that hit (for a prefill instance, the prefill of the miss).
    """

    # The field hides ``tuple.index`` (a candidate is never searched as a sequence).
    index: int  # type: ignore[assignment]
    cached_tokens: int
    queue_s: float
    service_s: float


def choose_instance(candidates: Sequence[InstanceView]) -> InstanceView:
    """The candidate that finishes the request's work soonest: ``queue_s + service_s``.

    Prefix affinity enters through ``service_s`` (a larger hit is less work) and load through
    ``queue_s``, as in Mooncake's scheduler. Ties go to the larger hit, then the lower index,
    so the choice is deterministic.
    """
    if not candidates:
        raise ValueError("candidates: need at least one instance")
    # ``min`` with that key, written as a loop (a key call per candidate costs more than the
    # comparison); the first smallest key wins, as with ``min``.
    best = candidates[0]
    best_key = (best.queue_s + best.service_s, -best.cached_tokens, best.index)
    for candidate in candidates[1:]:
        key = (candidate.queue_s + candidate.service_s, -candidate.cached_tokens, candidate.index)
        if key < best_key:
            best, best_key = candidate, key
    return best


def predict_rejection(predicted_ttft_s: float, sla: SLA, table: RoutingTable) -> bool:
    """Early rejection (HTTP 429) when the predicted TTFT breaks the P99 target."""
    return table.early_rejection and predicted_ttft_s > table.reject_ttft_factor * sla.ttft_p99_s
