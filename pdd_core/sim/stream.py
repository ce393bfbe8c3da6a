"""A run's summary folded as its requests end, so memory does not grow with the day.

``summarize`` (``summary.py``) folds a list of every request's record; a day of millions of
requests cannot keep that list. ``StreamingSummary`` is a record sink (``sinks.py``) that folds
each record at once into the same aggregates and keeps no record: counts and token sums
exactly, latencies in DDSketch quantile sketches (DataDog's ``ddsketch``; every quantile it
returns is within ``SKETCH_RELATIVE_ACCURACY`` of the value of that rank), overall, per hit
band and per window of ``window_s`` seconds. Its ``summary`` is a ``Summary`` with every field
``summarize`` gives, defined the same way (see ``summary.py``), with these differences:

- the percentiles are the sketch's: within 1% of the order statistic at rank
  ``floor(q (n - 1))``, where ``summarize`` interpolates linearly between it and the next one;
- the SLA verdict (``sla_met``, ``sla_violated``) is ``metrics.window_sla``'s rule on those
  sketched percentiles, so a run within 1% of a target may be judged the other way; ``good``
  requests and so goodput and attainment are counted exactly;
- float sums (WAN bytes, hit ratios) are running sums, equal to ``summarize``'s up to rounding,
  and revenue is the price book applied to the exact token sums.

Windows are fixed intervals of the time a request ended: its finish when served, its arrival
(the moment it was refused) when rejected. Records must come in that order, as the simulator
emits them; a window's sketches are reduced to its figures once it is over, so a window costs
a few hundred bytes and a long run's windows do not add up.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import Any

from ddsketch import DDSketch

from pdd_core import metrics
from pdd_core.sim.records import SimulatedRequest
from pdd_core.sim.summary import Summary, utilisation
from pdd_core.specs import SLA, PriceBook

SKETCH_RELATIVE_ACCURACY = 0.01
DEFAULT_WINDOW_S = 60.0


def new_sketch() -> DDSketch:
    """A quantile sketch at the one accuracy every figure here states (and so mergeable)."""
    return DDSketch(SKETCH_RELATIVE_ACCURACY)


def sketch_quantile(sketch: DDSketch, q: float, misses: int = 0) -> float:
    """The ``q``-th percentile (0-100) of the sketched values plus ``misses`` infinite ones
    (``metrics.window_sla``'s rule: ``inf`` once the rank reaches a miss); NaN when empty."""
    finite = int(sketch.count)
    n = finite + misses
    if n == 0:
        return math.nan
    position = q / 100.0 * (n - 1)
    if math.ceil(position) >= finite:
        return math.inf
    value = sketch.get_quantile_value(position / (finite - 1) if finite > 1 else 0.0)
    return math.nan if value is None else float(value)


@dataclass(frozen=True, slots=True)
class WindowSummary:
    """One window of ``StreamingSummary``: requests that ended in ``[start_s, end_s)``.

    ``ttft_misses`` and ``tpot_misses`` count served requests over the SLA's P90 targets (a
    request may count in both), ``rejected`` the refused ones; token counts are the served
    requests', ``revenue`` theirs at the run's price book. Percentiles are sketched (1%).
    """

    start_s: float
    end_s: float
    served: int
    rejected: int
    good: int
    ttft_misses: int
    tpot_misses: int
    input_tokens: int
    hit_tokens: int
    output_tokens: int
    wan_bytes: float
    ttft_p50: float
    ttft_p90: float
    ttft_p99: float
    tpot_p50: float
    tpot_p99: float
    e2e_p50: float
    e2e_p99: float


class _Window:
    """A window's running aggregates (see ``WindowSummary``)."""

    __slots__ = (
        "e2e",
        "good",
        "hit_tokens",
        "input_tokens",
        "output_tokens",
        "rejected",
        "served",
        "tpot",
        "tpot_misses",
        "ttft",
        "ttft_misses",
        "wan_bytes",
    )

    def __init__(self) -> None:
        self.served = self.rejected = self.good = 0
        self.ttft_misses = self.tpot_misses = 0
        self.input_tokens = self.hit_tokens = self.output_tokens = 0
        self.wan_bytes = 0.0
        self.ttft = new_sketch()
        self.tpot = new_sketch()
        self.e2e = new_sketch()

    def summary(self, index: int, width: float) -> WindowSummary:
        ttft, tpot, e2e = self.ttft, self.tpot, self.e2e
        return WindowSummary(
            index * width, (index + 1) * width, self.served, self.rejected, self.good,
            self.ttft_misses, self.tpot_misses, self.input_tokens, self.hit_tokens,
            self.output_tokens, self.wan_bytes,
            sketch_quantile(ttft, 50), sketch_quantile(ttft, 90), sketch_quantile(ttft, 99),
            sketch_quantile(tpot, 50), sketch_quantile(tpot, 99),
            sketch_quantile(e2e, 50), sketch_quantile(e2e, 99),
        )  # fmt: skip


class _Band:
    """One hit band's running aggregates (``summary.hit_band_table``'s row)."""

    __slots__ = ("pipelines", "rejected", "requests", "rld_tokens", "tokens", "ttft", "wan",
                 "within")  # fmt: skip

    def __init__(self) -> None:
        self.requests = self.rejected = self.within = self.tokens = self.rld_tokens = 0
        self.wan = 0.0
        self.ttft = new_sketch()
        self.pipelines: Counter[str] = Counter()


class StreamingSummary:
    """A record sink that folds every record into a run's aggregates and keeps none of them.

    ``summary(...)`` turns the aggregates into a ``Summary``;
    ``windows()`` lists the per-window figures. ``sla`` is needed while folding: whether a
    request was good, and its window's misses, are decided as it ends.
    """

    def __init__(self, sla: SLA, *, window_s: float = DEFAULT_WINDOW_S) -> None:
        if not window_s > 0:
            raise ValueError(f"window_s: must be positive, got {window_s!r}")
        self.sla = sla
        self.window_s = window_s
        self.requests = self.served = self.rejected = self.good = 0
        self.start_s = math.inf
        self.end_s = -math.inf
        # Served requests' figures (``summary._columns``): sketches and exact sums.
        self.ttft = new_sketch()
        self.ttft_nan = 0
        self.tpot_all = new_sketch()  # every served request's TPOT: the SLA window's
        self.tpot_all_nan = 0
        self.tpot_multi = new_sketch()  # requests with more than one output token
        self.e2e = new_sketch()
        self.stall = new_sketch()
        self.wan_bytes = 0.0
        self.input_tokens = self.hit_tokens_p = self.hit_tokens_md = 0
        self.miss_tokens = self.output_tokens = self.rld_tokens = 0
        self.hit_ratio_sum = 0.0
        self.kv_handoffs = self.id_handoffs = 0
        self.pipelines: Counter[str] = Counter()
        self.handoffs: Counter[str] = Counter()
        self.singular = 0  # every record's, refused ones too (``summary._singular_share``)
        self.bands = [_Band() for _ in metrics.hit_band_labels()]
        # The window now filling, and the figures of those before it: records come in order of
        # the time they ended (the simulator's clock), so a window is complete, and its three
        # sketches can go, once a record ends after it.
        self._open: tuple[int, _Window] | None = None
        self._closed: list[WindowSummary] = []

    def __len__(self) -> int:
        return self.requests

    def append(self, record: SimulatedRequest, /) -> None:
        self.requests += 1
        self.start_s = min(self.start_s, record.arrival_s)
        if record.pipeline == "P-RLD":
            self.singular += 1
        band = self.bands[metrics.hit_band_index(record.hit_ratio)]
        band.requests += 1
        band.wan += record.wan_bytes
        if record.rejected:
            self.rejected += 1
            band.rejected += 1
            self._window(record.arrival_s).rejected += 1
            return
        self._served(record, band)

    def _served(self, r: SimulatedRequest, band: _Band) -> None:
        self.served += 1
        sla = self.sla
        self.end_s = max(self.end_s, r.finish_s)
        ttft, tpot, e2e = r.ttft_s, r.tpot_mean_s, r.e2e_s
        good = metrics.request_meets_sla(ttft, tpot, sla.ttft_p90_s, sla.tpot_p90_s)
        self.good += good
        if math.isnan(ttft):
            self.ttft_nan += 1
        else:
            self.ttft.add(ttft)
            band.ttft.add(ttft)
        if math.isnan(tpot):
            self.tpot_all_nan += 1
        else:
            self.tpot_all.add(tpot)
            if r.output_tokens > 1:
                self.tpot_multi.add(tpot)
        self.e2e.add(e2e)
        self.stall.add(r.longest_stall_s)
        self.wan_bytes += r.wan_bytes
        self.input_tokens += r.input_tokens
        self.hit_tokens_p += r.hit_tokens_p
        self.hit_tokens_md += r.hit_tokens_md
        self.miss_tokens += r.miss_tokens
        self.output_tokens += r.output_tokens
        self.rld_tokens += r.tokens_rld
        self.hit_ratio_sum += metrics.hit_ratio(r.hit_tokens_p, r.input_tokens)
        self.kv_handoffs += r.kv_handoffs
        self.id_handoffs += r.id_handoffs
        self.pipelines[r.pipeline] += 1
        self.handoffs[r.handoff_mode] += 1
        band.within += ttft <= sla.ttft_p90_s
        band.tokens += r.output_tokens
        band.rld_tokens += r.tokens_rld
        band.pipelines[r.pipeline] += 1
        window = self._window(r.finish_s)
        window.served += 1
        window.good += good
        window.ttft_misses += not ttft <= sla.ttft_p90_s
        window.tpot_misses += not tpot <= sla.tpot_p90_s
        window.input_tokens += r.input_tokens
        window.hit_tokens += r.hit_tokens_p
        window.output_tokens += r.output_tokens
        window.wan_bytes += r.wan_bytes
        if not math.isnan(ttft):
            window.ttft.add(ttft)
        if not math.isnan(tpot):
            window.tpot.add(tpot)
        window.e2e.add(e2e)

    def _window(self, t: float) -> _Window:
        index = math.floor(t / self.window_s)
        if self._open is not None:
            current, window = self._open
            if index == current:
                return window
            if index < current:
                raise ValueError(
                    f"records: must come in order of the time they ended; one ended at {t} s, "
                    f"after one in the window from {current * self.window_s} s"
                )
            self._closed.append(window.summary(current, self.window_s))
        window = _Window()
        self._open = (index, window)
        return window

    def windows(self) -> list[WindowSummary]:
        """Every window that saw a request, in time order."""
        if self._open is None:
            return list(self._closed)
        index, window = self._open
        return [*self._closed, window.summary(index, self.window_s)]

    def hit_bands(self) -> list[dict[str, Any]]:
        """``summary.hit_band_table``'s rows from the running aggregates."""
        total = self.requests or 1
        total_wan = sum(b.wan for b in self.bands) or 1.0
        rows = []
        for label, band in zip(metrics.hit_band_labels(), self.bands, strict=True):
            served = band.requests - band.rejected
            rows.append(
                {
                    "band": label,
                    "requests": band.requests,
                    "share": band.requests / total,
                    "rejected": band.rejected,
                    "ttft_p50": sketch_quantile(band.ttft, 50),
                    "ttft_p99": sketch_quantile(band.ttft, 99),
                    "ttft_within_sla": band.within / served if served else math.nan,
                    "wan_share": band.wan / total_wan,
                    "rld_token_share": band.rld_tokens / band.tokens if band.tokens else 0.0,
                    "pipelines": _shares(band.pipelines),
                }
            )
        return rows

    def summary(
        self,
        policy: str,
        *,
        prices: PriceBook,
        cost_per_hour: float,
        busy: dict[str, tuple[float, int]],
        wan_series: list[tuple[float, float]],
        wan_busy_s: float = 0.0,
        wan_cancelled: int = 0,
        preemptions: int = 0,
    ) -> Summary:
        """The run's ``Summary``, as ``summarize`` defines each field (module docstring)."""
        start = self.start_s if self.requests else 0.0
        end = self.end_s if self.served else start
        makespan = max(end - start, 1e-9)
        sla = self.sla
        ttft_misses = self.rejected + self.ttft_nan
        tpot_misses = self.rejected + self.tpot_all_nan
        checks = (
            ("ttft_p90", sketch_quantile(self.ttft, 90, ttft_misses), sla.ttft_p90_s),
            ("ttft_p99", sketch_quantile(self.ttft, 99, ttft_misses), sla.ttft_p99_s),
            ("tpot_p90", sketch_quantile(self.tpot_all, 90, tpot_misses), sla.tpot_p90_s),
            ("tpot_p99", sketch_quantile(self.tpot_all, 99, tpot_misses), sla.tpot_p99_s),
        )
        violated = "" if self.requests else "no requests"
        for name, value, target in checks:
            if not violated and not value <= target:
                violated = name
        goodput = self.good / makespan
        revenue = prices.revenue(self.miss_tokens, self.hit_tokens_p, self.output_tokens)
        revenue_per_hour = revenue * 3600 / makespan
        out, wan = self.output_tokens, self.wan_bytes
        handoffs = self.kv_handoffs + self.id_handoffs
        return Summary(
            policy=policy,
            requests=self.requests,
            served=self.served,
            rejected=self.rejected,
            makespan_s=makespan,
            ttft_p50=sketch_quantile(self.ttft, 50),
            ttft_p90=sketch_quantile(self.ttft, 90),
            ttft_p99=sketch_quantile(self.ttft, 99),
            tpot_p50=sketch_quantile(self.tpot_multi, 50),
            tpot_p90=sketch_quantile(self.tpot_multi, 90),
            tpot_p99=sketch_quantile(self.tpot_multi, 99),
            e2e_p50=sketch_quantile(self.e2e, 50),
            e2e_p90=sketch_quantile(self.e2e, 90),
            e2e_p99=sketch_quantile(self.e2e, 99),
            longest_stall_p99=sketch_quantile(self.stall, 99),
            goodput_rps=goodput,
            throughput_rps=self.served / makespan,
            output_tokens_per_s=out / makespan,
            sla_met=not violated,
            wan_bytes=wan,
            wan_gbps_mean=wan * 8 / makespan / 1e9,
            wan_gbps_peak=max((g for _, g in wan_series), default=0.0),
            rld_token_share=self.rld_tokens / out if out else 0.0,
            hit_request_weighted=self.hit_ratio_sum / self.served if self.served else 0.0,
            hit_token_weighted=metrics.hit_ratio(self.hit_tokens_p, self.input_tokens),
            md_hit_token_weighted=metrics.hit_ratio(self.hit_tokens_md, self.input_tokens),
            cost_per_hour=cost_per_hour,
            bcr=goodput / cost_per_hour if cost_per_hour > 0 else math.nan,
            revenue_per_hour=revenue_per_hour,
            bcr_revenue=revenue_per_hour / cost_per_hour if cost_per_hour > 0 else math.nan,
            utilisation=utilisation(busy, makespan),
            pipeline_mix=_shares(self.pipelines),
            handoff_mix=_shares(self.handoffs),
            hit_bands=self.hit_bands(),
            sla_attainment=self.good / self.requests if self.requests else 0.0,
            sla_violated=violated,
            singular_share=self.singular / self.requests if self.requests else 0.0,
            wan_gbps_busy_mean=wan * 8 / wan_busy_s / 1e9 if wan_busy_s > 0 else 0.0,
            wan_busy_s=wan_busy_s,
            wan_cancelled=wan_cancelled,
            preemptions=preemptions,
            handoff_kv_share=self.kv_handoffs / handoffs if handoffs else 0.0,
        )


def _shares(counts: Counter[str]) -> dict[str, float]:
    total = sum(counts.values())
    return {key: n / total for key, n in sorted(counts.items())} if total else {}
