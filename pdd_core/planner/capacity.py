"""The fast analytic capacity model of DOMAIN.md section 6, used to search designs.

For a design and a workload profile it computes, per stage, a throughput and the share of
traffic routed to it, so ``capacity = min over stages of throughput / share``, and the tails:

- **P** (prefill compute): each request's service is ``perf.prefill_time(miss, hit, tp)``, of
  which a pipelined instance is occupied only until its first stage frees (``Timing.fill_s``,
  ``pdd_core.pipeline``: the next request enters behind it); the pool is a G/G/c queue
  (Erlang C for the chance to wait, Kingman's ``(ca^2 + cs^2) / 2`` for
  burstiness, an exponential tail for the wait).
- **WAN**: every non-singular request ships the KV MD lacks (its miss, as the decode-side radix
  cache tracks P's hits); the line is processor-shared, so a transfer of ``x`` bytes takes
  ``x / (B (1 - rho))`` on average plus the RTT. P-MD takes the requests whose predicted
  transfer fits the budget; the rest relay.
- **MD** (decode): a batch ``b*`` = the largest batch whose KV fits (input + output reserved, as
  admission does) and whose step meets the TPOT target; each of ``instances x b*`` slots serves
  one sequence for ``output x step(b*)``; admission waits are Erlang C over those slots.
- **RLD**: relayed requests occupy a slot until MD has their KV (the WAN transfer), singular
  ones for their whole (short) output.

TTFT of a request = its own service path + the waits of the queues it crosses; waits are drawn
from common random numbers (fixed seed) so every design sees the same draws and the comparison is
deterministic. Nothing is fitted to the simulator: it is the check, not a calibration source.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum

import numpy as np

from pdd_core import perf
from pdd_core.planner.design import PDD, Design
from pdd_core.planner.profile import FloatArray, WorkloadProfile
from pdd_core.sim import SimConfig
from pdd_core.sim.steps import StepModel
from pdd_core.specs import SLA, ChipSpec, InstanceShape, LinkSpec, ModelSpec, PriceBook, as_shape


class Constraint(StrEnum):
    """What a design runs into: stage names, binding constraints and violation kinds.

    The search grows pools and the reasons pick their sentences by these kinds, never by the
    text of a message (the text is for people).
    """

    PREFILL = "prefill compute"
    DECODE_KV = "decode KV capacity"
    DECODE_TPOT = "decode TPOT"
    DECODE_FIT = "decode fit"
    WAN = "WAN bandwidth"
    RELAY = "RLD capacity"
    RELAY_FIT = "RLD fit"
    COLOCATED = "colocated capacity"
    TTFT_TAIL = "TTFT tail"
    TPOT_TAIL = "TPOT tail"


# The stage names as plain names (they are the binding constraints a plan's reasons name).
PREFILL = Constraint.PREFILL
DECODE_KV = Constraint.DECODE_KV
DECODE_TPOT = Constraint.DECODE_TPOT
WAN = Constraint.WAN
RELAY = Constraint.RELAY
TTFT_TAIL = Constraint.TTFT_TAIL


@dataclass(frozen=True, slots=True)
class Violation:
    """One SLA or capacity rule a design breaks: its ``kind`` and a sentence for people."""

    kind: Constraint
    text: str

    def __str__(self) -> str:
        return self.text


# Largest utilisation the model accepts for a stage: queues explode as rho -> 1, and the
# simulator's traffic is burstier than Poisson, so a design at 99% would not verify.
MAX_UTILISATION = 0.95
WAIT_DRAWS = 6


@dataclass(frozen=True, slots=True)
class StageView:
    """One stage of a design under a workload: how busy it is and how much it can take."""

    name: str
    utilisation: float
    capacity_rps: float
    detail: str


@dataclass(frozen=True, slots=True)
class Evaluation:
    """The analytic verdict on one design (percentiles in seconds, rates in requests/s).

    ``ttft_service`` is TTFT with every queue empty (the service path alone): when it already
    misses the SLA no instance count helps, only faster chips, a larger tp or a looser target."""

    meets_sla: bool
    stable: bool
    ttft: dict[str, float]
    ttft_service: dict[str, float]
    tpot: dict[str, float]
    goodput_rps: float
    cost_per_hour: float
    bcr: float
    revenue_per_hour: float
    stages: tuple[StageView, ...]
    shares: dict[str, float]
    binding: str
    violations: tuple[Violation, ...]

    def stage(self, name: str) -> StageView | None:
        return next((s for s in self.stages if s.name == name), None)


def erlang_c(servers: int, offered: float) -> float:
    """Probability of waiting in M/M/c with ``servers`` and ``offered`` Erlangs (1 if unstable).

    Erlang B by its stable recursion, then C = B / (1 - rho (1 - B)).
    """
    if offered <= 0:
        return 0.0
    if offered >= servers:
        return 1.0
    blocking = 1.0
    for k in range(1, servers + 1):
        blocking = offered * blocking / (k + offered * blocking)
    rho = offered / servers
    return blocking / (1.0 - rho * (1.0 - blocking))


@dataclass(frozen=True, slots=True)
class Wait:
    """A queue's wait: 0 with probability ``1 - p_wait``, else exponential with ``mean_s``."""

    p_wait: float
    mean_s: float

    def draw(self, uniform: FloatArray, exponential: FloatArray) -> FloatArray:
        result: FloatArray = np.where(uniform < self.p_wait, exponential * self.mean_s, 0.0)
        return result


def gg_wait(servers: int, arrival_rps: float, service: FloatArray, arrival_cv2: float) -> Wait:
    """Allen-Cunneen's G/G/c approximation: Erlang C scaled by ``(ca^2 + cs^2) / 2``."""
    mean = float(service.mean()) if service.size else 0.0
    if arrival_rps <= 0 or mean <= 0:
        return Wait(0.0, 0.0)
    offered = arrival_rps * mean
    if offered >= servers:
        return Wait(1.0, math.inf)
    cs2 = float(service.var()) / mean**2
    p_wait = erlang_c(servers, offered)
    slack = servers / mean - arrival_rps
    return Wait(p_wait, (arrival_cv2 + cs2) / 2.0 / slack)


class Evaluator:
    """Evaluates designs on one profile; caches per-(chip, tp) service times across designs."""

    def __init__(
        self,
        *,
        model: ModelSpec,
        chips: dict[str, ChipSpec],
        wan: LinkSpec | None,
        rdma: LinkSpec | None,
        sla: SLA,
        prices: PriceBook,
        config: SimConfig,
        profile: WorkloadProfile,
        seed: int = 0,
    ) -> None:
        self.model = model
        self.chips = chips
        self.wan = wan
        self.rdma = rdma
        self.sla = sla
        self.prices = prices
        self.config = config
        self.profile = profile
        self.seed = seed
        rng = np.random.default_rng(seed)
        shape = (WAIT_DRAWS, profile.input_tokens.size)
        self._uniform = [rng.random(shape) for _ in range(2)]
        self._exponential = [rng.exponential(1.0, shape) for _ in range(2)]
        self._prefill: dict[tuple[str, InstanceShape], tuple[FloatArray, FloatArray]] = {}
        self._batch: dict[tuple[str, InstanceShape, bool], tuple[int, float, str]] = {}
        self._steps: dict[tuple[str, InstanceShape], StepModel] = {}

    # ---- per-(chip, tp) physics ------------------------------------------------------------

    def prefill_service(self, chip: str, tp: perf.ShapeLike) -> FloatArray:
        """Each sampled request's prefill of its miss over its hit (seconds: its latency)."""
        return self._prefill_times(chip, tp)[0]

    def prefill_occupancy(self, chip: str, tp: perf.ShapeLike) -> FloatArray:
        """The instance-seconds each sampled request's prefill occupies: its latency less the
        pipeline's fill (equal to ``prefill_service`` without pipeline parallelism)."""
        return self._prefill_times(chip, tp)[1]

    def _prefill_times(self, chip: str, tp: perf.ShapeLike) -> tuple[FloatArray, FloatArray]:
        key = (chip, as_shape(tp))
        found = self._prefill.get(key)
        if found is None:
            spec = self.chips[chip]
            p = self.profile
            timings = [
                perf.prefill_time(self.model, spec, int(m), int(h), tp)
                for m, h in zip(p.miss_tokens, p.hit_tokens, strict=True)
            ]
            latency = np.array([t.seconds for t in timings])
            occupied = np.array([t.seconds - t.fill_s for t in timings])
            found = self._prefill[key] = (latency, occupied)
        return found

    def step(self, chip: str, tp: perf.ShapeLike, batch: int) -> float:
        """One decode step at the profile's mean context (input + half the output)."""
        p = self.profile
        context = int(np.mean(p.input_tokens + p.output_tokens / 2))
        spec = self.chips[chip]
        return perf.decode_step_time_uniform(self.model, spec, max(batch, 1), context, tp).seconds

    def steps(self, chip: str, tp: perf.ShapeLike) -> StepModel:
        """The simulator's iteration times of an instance of ``chip`` at ``tp`` (one per kind)."""
        key = (chip, as_shape(tp))
        found = self._steps.get(key)
        if found is None:
            found = self._steps[key] = StepModel(self.model, self.chips[chip], key[1])
        return found

    def kv_batch(self, chip: str, tp: perf.ShapeLike, *, drc: bool) -> tuple[int, str]:
        """``(batch, limit)``: the most sequences of the profile's mean length (input and output
        reserved, as admission does) an instance's KV pool holds (after the DRC share), capped
        by the engine's ``max_batch``; ``limit`` names which of the two binds."""
        p = self.profile
        capacity = perf.kv_capacity_tokens(self.model, self.chips[chip], tp)
        if drc:
            capacity = int(capacity * (1.0 - self.config.drc_fraction))
        reserve = float(np.mean(p.input_tokens + p.output_tokens))
        by_kv = int(capacity // reserve) if reserve > 0 else self.config.max_batch
        limit = DECODE_KV if by_kv < self.config.max_batch else "max_batch"
        return min(by_kv, self.config.max_batch), limit

    def decode_batch(self, chip: str, tp: perf.ShapeLike, *, drc: bool) -> tuple[int, float, str]:
        """``(b*, step(b*), limit)``: the batch a decode instance runs at, and what bounds it.

        ``limit`` is ``DECODE_KV`` when the KV pool (after the DRC share) caps the batch,
        ``DECODE_TPOT`` when the TPOT target does, ``"max_batch"`` for the engine setting.
        ``b* = 0`` when not even one sequence fits or meets the TPOT target.
        """
        key = (chip, as_shape(tp), drc)
        if key in self._batch:
            return self._batch[key]
        top, limit = self.kv_batch(chip, tp, drc=drc)
        target = self.sla.tpot_p90_s
        if top >= 1 and self.step(chip, tp, top) > target:
            lo, hi = 0, top  # step(lo) meets (or lo = 0), step(hi) does not
            while hi - lo > 1:
                mid = (lo + hi) // 2
                if self.step(chip, tp, mid) <= target:
                    lo = mid
                else:
                    hi = mid
            top, limit = lo, DECODE_TPOT
        result = (top, self.step(chip, tp, top) if top else math.inf, limit)
        self._batch[key] = result
        return result

    # ---- one design ------------------------------------------------------------------------

    def for_profile(self, profile: WorkloadProfile) -> Evaluator:
        """An evaluator of the same deployment space on another profile (same seed)."""
        return Evaluator(
            model=self.model,
            chips=self.chips,
            wan=self.wan,
            rdma=self.rdma,
            sla=self.sla,
            prices=self.prices,
            config=self.config,
            profile=profile,
            seed=self.seed,
        )

    def same_samples(self, profile: WorkloadProfile) -> bool:
        """True when ``profile`` only differs in rate (``scaled``): the caches still apply."""
        mine = self.profile
        return (
            profile.input_tokens is mine.input_tokens
            and profile.hit_tokens is mine.hit_tokens
            and profile.output_tokens is mine.output_tokens
        )

    def draws(self, index: int) -> tuple[FloatArray, FloatArray]:
        return self._uniform[index], self._exponential[index]

    def is_pdd(self, design: Design) -> bool:
        return design.policy == PDD
