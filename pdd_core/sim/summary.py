"""Aggregates of a run: the figures ``pdd compare`` and the report show (issue item 2).

Percentiles and hit rates come from ``pdd_core.metrics``, so a simulated P99 means what a live
dashboard's P99 means. Definitions, stated once:

- TTFT, TPOT (each request's mean time per output token) and E2E percentiles are over served
  requests; rejected requests are counted in ``rejected`` and never in a latency.
- A request is *good* and a run's ``sla_met`` as ``pdd_core.metrics`` defines them, once for
  the whole product (``request_meets_sla``, ``window_sla``): rejected requests are misses.
  Goodput here is good requests over the makespan (first arrival to last finish), a
  fixed-load figure; ``pdd_core.sim.capacity`` gives goodput as a capacity.
- BCR is goodput over the hardware cost rate (DOMAIN.md section 5: requests/s per $/h);
  ``bcr_revenue`` the revenue variant (price book revenue per hour over cost per hour).
- WAN Gbps: mean is all WAN bytes over the makespan, ``wan_gbps_busy_mean`` all WAN bytes
  over the time some transfer was on the line, peak the largest ``wan_bin_s`` bin. Bytes of a
  transfer cancelled because its request finished on RLD count as far as they were sent.
- ``singular_share``: requests the singular filter sent to P-RLD, over all requests.
- ``hit_*_weighted`` are the prefix hits the simulated P instances saw (split caches, finite
  capacity, and a turn that arrives before its predecessor's prefill ended misses);
  ``trace_hit_*_weighted`` the trace's own, replayed through one infinite cache in arrival
  order (``pdd_core.workload.stats``), filled in by ``with_trace_hits`` (NaN until then).
- ``handoff_kv_share``: handoff chunks MD received as KV over the WAN, over all chunks (the
  rest were recomputed from token IDs); each chunk takes whichever was predicted sooner.
- ``preemptions``: sequences preempted (KV pages freed, recomputed later) on any instance.
- Utilisation per role: busy time over instances x makespan.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from pdd_core import metrics
from pdd_core.sim.records import SimulatedRequest
from pdd_core.specs import SLA, PriceBook
from pdd_core.workload import Request
from pdd_core.workload.stats import replay_hits

COMPARE_KEYS: tuple[str, ...] = (
    "ttft_p50",
    "ttft_p90",
    "ttft_p99",
    "tpot_p50",
    "tpot_p99",
    "goodput_rps",
    "cost_per_hour",
    "bcr",
    "wan_gbps_mean",
    "wan_gbps_peak",
    "rld_token_share",
    "rejected",
    "singular_share",
    "wan_gbps_busy_mean",
    "hit_token_weighted",
    "trace_hit_token_weighted",
)


@dataclass(frozen=True, slots=True)
class Summary:
    """Aggregates of one policy's run (see the module docstring for each definition)."""

    policy: str
    requests: int
    served: int
    rejected: int
    makespan_s: float
    ttft_p50: float
    ttft_p90: float
    ttft_p99: float
    tpot_p50: float
    tpot_p90: float
    tpot_p99: float
    e2e_p50: float
    e2e_p90: float
    e2e_p99: float
    longest_stall_p99: float
    goodput_rps: float
    throughput_rps: float
    output_tokens_per_s: float
    sla_met: bool
    wan_bytes: float
    wan_gbps_mean: float
    wan_gbps_peak: float
    rld_token_share: float
    hit_request_weighted: float
    hit_token_weighted: float
    md_hit_token_weighted: float
    cost_per_hour: float
    bcr: float
    revenue_per_hour: float
    bcr_revenue: float
    utilisation: dict[str, float]
    pipeline_mix: dict[str, float]
    handoff_mix: dict[str, float]
    hit_bands: list[dict[str, Any]]
    sla_attainment: float = 0.0
    sla_violated: str = ""
    singular_share: float = 0.0
    wan_gbps_busy_mean: float = 0.0
    wan_busy_s: float = 0.0
    wan_cancelled: int = 0
    preemptions: int = 0
    handoff_kv_share: float = 0.0
    trace_hit_request_weighted: float = math.nan
    trace_hit_token_weighted: float = math.nan

    def compare_dict(self) -> dict[str, float]:
        """Exactly the keys of ``pdd compare --json`` (NaN becomes None in JSON)."""
        row = asdict(self)
        return {key: row[key] for key in COMPARE_KEYS}

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class _Columns:
    """The served requests' per-request columns (one pass over them), and two sums."""

    ttfts: list[float]
    tpots: list[float]  # every served request's (the SLA window)
    tpots_multi: list[float]  # those of requests with more than one output token
    e2es: list[float]
    stalls: list[float]
    wans: list[float]
    revenues: list[float]
    inputs: list[int]
    hits_p: list[int]
    hits_md: list[int]
    out_tokens: int
    rld_tokens: int


def _columns(served: Sequence[SimulatedRequest], prices: PriceBook) -> _Columns:
    """Every per-request column ``summarize`` folds, in one pass over the served requests."""
    ttfts: list[float] = []
    tpots: list[float] = []
    tpots_multi: list[float] = []
    e2es: list[float] = []
    stalls: list[float] = []
    wans: list[float] = []
    revenues: list[float] = []
    inputs: list[int] = []
    hits_p: list[int] = []
    hits_md: list[int] = []
    out_tokens = rld_tokens = 0
    for r in served:
        ttfts.append(r.ttft_s)
        tpots.append(r.tpot_mean_s)
        if r.output_tokens > 1:
            tpots_multi.append(r.tpot_mean_s)
        e2es.append(r.e2e_s)
        stalls.append(r.longest_stall_s)
        wans.append(r.wan_bytes)
        revenues.append(prices.revenue(r.miss_tokens, r.hit_tokens_p, r.output_tokens))
        inputs.append(r.input_tokens)
        hits_p.append(r.hit_tokens_p)
        hits_md.append(r.hit_tokens_md)
        out_tokens += r.output_tokens
        rld_tokens += r.tokens_rld
    return _Columns(ttfts, tpots, tpots_multi, e2es, stalls, wans, revenues, inputs, hits_p,
                    hits_md, out_tokens, rld_tokens)  # fmt: skip


def summarize(
    policy: str,
    records: Sequence[SimulatedRequest],
    *,
    sla: SLA,
    prices: PriceBook,
    cost_per_hour: float,
    busy: dict[str, tuple[float, int]],
    wan_series: Sequence[tuple[float, float]],
    wan_busy_s: float = 0.0,
    wan_cancelled: int = 0,
    preemptions: int = 0,
) -> Summary:
    """Fold the per-request records into a ``Summary``; ``busy`` maps role -> (s, instances)."""
    served = [r for r in records if not r.rejected]
    rejected = len(records) - len(served)
    start = min((r.arrival_s for r in records), default=0.0)
    cols = _columns(served, prices)
    end = max((r.finish_s for r in served), default=start)
    makespan = max(end - start, 1e-9)
    ttft = metrics.percentiles(cols.ttfts)
    tpot = metrics.percentiles(cols.tpots_multi)
    e2e = metrics.percentiles(cols.e2es)
    window = _window(cols.ttfts, cols.tpots, rejected, sla)
    goodput = window.good / makespan
    wan_bytes = math.fsum(cols.wans)
    revenue = math.fsum(cols.revenues) * 3600 / makespan
    out_tokens = cols.out_tokens
    return Summary(
        policy=policy,
        requests=len(records),
        served=len(served),
        rejected=rejected,
        makespan_s=makespan,
        ttft_p50=ttft["p50"],
        ttft_p90=ttft["p90"],
        ttft_p99=ttft["p99"],
        tpot_p50=tpot["p50"],
        tpot_p90=tpot["p90"],
        tpot_p99=tpot["p99"],
        e2e_p50=e2e["p50"],
        e2e_p90=e2e["p90"],
        e2e_p99=e2e["p99"],
        longest_stall_p99=metrics.percentile(cols.stalls, 99),
        goodput_rps=goodput,
        throughput_rps=len(served) / makespan,
        output_tokens_per_s=out_tokens / makespan,
        sla_met=window.met,
        wan_bytes=wan_bytes,
        wan_gbps_mean=wan_bytes * 8 / makespan / 1e9,
        wan_gbps_peak=max((g for _, g in wan_series), default=0.0),
        rld_token_share=cols.rld_tokens / out_tokens if out_tokens else 0.0,
        hit_request_weighted=metrics.request_weighted_hit(cols.hits_p, cols.inputs),
        hit_token_weighted=metrics.token_weighted_hit(cols.hits_p, cols.inputs),
        md_hit_token_weighted=metrics.token_weighted_hit(cols.hits_md, cols.inputs),
        cost_per_hour=cost_per_hour,
        bcr=goodput / cost_per_hour if cost_per_hour > 0 else math.nan,
        revenue_per_hour=revenue,
        bcr_revenue=revenue / cost_per_hour if cost_per_hour > 0 else math.nan,
        utilisation=utilisation(busy, makespan),
        pipeline_mix=_shares(r.pipeline for r in served),
        handoff_mix=_shares(r.handoff_mode for r in served),
        hit_bands=hit_band_table(records, sla),
        sla_attainment=window.attainment,
        sla_violated=window.violated,
        singular_share=_singular_share(records),
        wan_gbps_busy_mean=wan_bytes * 8 / wan_busy_s / 1e9 if wan_busy_s > 0 else 0.0,
        wan_busy_s=wan_busy_s,
        wan_cancelled=wan_cancelled,
        preemptions=preemptions,
        handoff_kv_share=_kv_share(served),
    )


def utilisation(busy: dict[str, tuple[float, int]], makespan: float) -> dict[str, float]:
    """Per role, busy seconds over its instances x the makespan."""
    return {
        role: seconds / (count * makespan) if count else 0.0
        for role, (seconds, count) in busy.items()
    }


def _singular_share(records: Sequence[SimulatedRequest]) -> float:
    """Requests the singular filter sent to P-RLD, over all requests."""
    return sum(1 for r in records if r.pipeline == "P-RLD") / len(records) if records else 0.0


def _kv_share(served: Sequence[SimulatedRequest]) -> float:
    """Share of handoff chunks absorbed by shipping their KV rather than recomputing them."""
    kv = sum(r.kv_handoffs for r in served)
    total = kv + sum(r.id_handoffs for r in served)
    return kv / total if total else 0.0


def sla_window(records: Sequence[SimulatedRequest], sla: SLA) -> metrics.SlaWindow:
    """``metrics.window_sla`` over a run's records: rejected requests count as misses."""
    served = [r for r in records if not r.rejected]
    return _window(
        [r.ttft_s for r in served], [r.tpot_mean_s for r in served], len(records) - len(served), sla
    )


def _window(ttft_s: list[float], tpot_s: list[float], misses: int, sla: SLA) -> metrics.SlaWindow:
    """``metrics.window_sla`` with ``sla``'s targets (the served requests' columns)."""
    return metrics.window_sla(
        ttft_s,
        tpot_s,
        ttft_p90_s=sla.ttft_p90_s,
        ttft_p99_s=sla.ttft_p99_s,
        tpot_p90_s=sla.tpot_p90_s,
        tpot_p99_s=sla.tpot_p99_s,
        misses=misses,
    )


def _shares(values: Any) -> dict[str, float]:
    counts = Counter(values)
    total = sum(counts.values())
    return {key: n / total for key, n in sorted(counts.items())} if total else {}


@dataclass(slots=True)
class _Band:
    """One hit band's requests, folded in ``hit_band_table``'s single pass."""

    requests: int = 0
    rejected: int = 0
    output_tokens: int = 0
    rld_tokens: int = 0
    wan_bytes: list[float] = field(default_factory=list)
    ttfts: list[float] = field(default_factory=list)  # served requests'
    pipelines: list[str] = field(default_factory=list)  # served requests'


def hit_band_table(records: Sequence[SimulatedRequest], sla: SLA) -> list[dict[str, Any]]:
    """Per hit band of ``metrics.HIT_BAND_EDGES``: share, TTFT, WAN bytes, RLD share, rejects.

    One pass over the records (each record read once: a run's ~12k records are spread over
    memory, and a pass per band and figure cost ~4% of a run)."""
    labels = metrics.hit_band_labels()
    bands = [_Band() for _ in labels]
    band_of, ratio = metrics.hit_band_index, metrics.hit_ratio
    for r in records:
        band = bands[band_of(ratio(r.hit_tokens_p, r.input_tokens))]  # ``r.hit_ratio``
        band.requests += 1
        band.wan_bytes.append(r.wan_bytes)
        if r.rejected:
            band.rejected += 1
            continue
        band.ttfts.append(r.ttft_s)
        band.output_tokens += r.output_tokens
        band.rld_tokens += r.tokens_rld
        band.pipelines.append(r.pipeline)
    total = len(records) or 1
    # ``fsum`` is correctly rounded, so summing band by band gives the sum over the records.
    total_wan = math.fsum(w for band in bands for w in band.wan_bytes) or 1.0
    rows = []
    for label, band in zip(labels, bands, strict=True):
        ttft, tokens = band.ttfts, band.output_tokens
        rows.append(
            {
                "band": label,
                "requests": band.requests,
                "share": band.requests / total,
                "rejected": band.rejected,
                "ttft_p50": metrics.percentile(ttft, 50),
                "ttft_p99": metrics.percentile(ttft, 99),
                "ttft_within_sla": (
                    sum(1 for t in ttft if t <= sla.ttft_p90_s) / len(ttft) if ttft else math.nan
                ),
                "wan_share": math.fsum(band.wan_bytes) / total_wan,
                "rld_token_share": band.rld_tokens / tokens if tokens else 0.0,
                "pipelines": _shares(band.pipelines),
            }
        )
    return rows


def trace_hits(requests: Sequence[Request], block_size: int) -> tuple[float, float]:
    """The workload's own hit rates (request-, token-weighted), as ``pdd trace stats`` has them."""
    hits, _ = replay_hits(requests, block_size)
    inputs = [r.input_tokens for r in requests]
    return metrics.request_weighted_hit(hits, inputs), metrics.token_weighted_hit(hits, inputs)


def with_trace_hits(summary: Summary, rates: tuple[float, float]) -> Summary:
    """``summary`` with the trace's own hit rates (from ``trace_hits``) beside the simulated."""
    return replace(summary, trace_hit_request_weighted=rates[0], trace_hit_token_weighted=rates[1])
