"""Pipeline parallelism as engines run it: the one home for how ``pp`` stages time a pass.

An instance of ``pp`` stages holds ``layers / pp`` layers per stage; a pass moves through the
stages in micro-batches, and a stage hands each micro-batch's activations to the next one over
the link between them. Two figures follow, and they differ:

- **latency** (one request): a pass of ``m`` micro-batches finishes ``pp`` stage times plus the
  ``pp - 1`` hand-offs after its first micro-batch enters, and each further micro-batch adds one
  *period* (a stage time plus the slowest hand-off): ``(m + pp - 1)`` stage times for uniform
  stages. SGLang's chunked pipeline parallelism runs successive chunks of one request in
  different stages at once, which is this bound (docs.sglang.io "Pipeline Parallelism for Long
  Context"; lmsys.org/blog/2026-01-15-chunked-pipeline);
- **occupancy** (throughput): the first stage is busy for ``m`` periods, then takes the next
  iteration's micro-batches while the pass drains through the others. Engines keep up to ``pp``
  iterations in flight: vLLM V0 runs ``pp`` virtual engines, each scheduling its own batch onto
  the shared stages, and V1 keeps ``pp`` batches in flight from one scheduler (vLLM RFC #11945;
  vLLM's pipeline-parallel docs: "pipeline parallelism runs a pp_size number of virtual
  engines", each batch a micro-batch). So small chunks keep the pipeline busy rather than idle.

The part of the latency after the occupancy, ``fill``, is when the first stage is already free
but the pass's last micro-batch is still in the later stages. A decode step's tokens depend on
the step before, so successive steps do not overlap: a step sends ``min(batch, pp)``
micro-batches round the pipeline and takes ``pp`` periods (``fill`` = 0).

Hand-offs are charged on the link they cross: stage ``s`` occupies chips ``[s c, (s + 1) c)``
of the instance (``c`` = chips per stage), so a boundary whose ranks sit in two scale-up domains
crosses the scale-out network and the others stay on the scale-up fabric (NVLink).
"""

from __future__ import annotations

from typing import NamedTuple

from pdd_core.collectives import ACTIVATION_BYTES, SEND_LATENCY_S
from pdd_core.specs import ChipSpec, InstanceShape


def crossing_boundaries(chip: ChipSpec, shape: InstanceShape) -> int:
    """Stage boundaries (of ``pp - 1``) whose hand-off leaves a scale-up domain.

    Rank ``r`` of stage ``s`` sits on chip ``s c + r``; boundary ``s -> s + 1`` crosses when any
    rank's chip and its successor's chip are in different domains (the boundary waits for its
    slowest rank).
    """
    per_stage = shape.stage_chips
    domain = chip.scaleup_domain
    crossing = 0
    for stage in range(1, shape.pp):
        start = stage * per_stage
        ranks = range(per_stage)
        if any((start - per_stage + r) // domain != (start + r) // domain for r in ranks):
            crossing += 1
    return crossing


class StageLinks(NamedTuple):
    """The hand-offs of one instance's pipeline: how many boundaries stay inside a scale-up
    domain and how many cross it, and each link's bytes per second."""

    intra: int
    inter: int
    intra_bytes_per_s: float
    inter_bytes_per_s: float

    def handoff_s(self, tokens: float, hidden_size: int) -> tuple[float, float]:
        """(sum of every boundary's hand-off, the slowest boundary's) for one micro-batch of
        ``tokens`` tokens: one activation per token, ``hidden x 2 B``, plus the send latency."""
        message = tokens * hidden_size * ACTIVATION_BYTES
        intra_s = SEND_LATENCY_S + message / self.intra_bytes_per_s
        inter_s = SEND_LATENCY_S + message / self.inter_bytes_per_s
        total = self.intra * intra_s + self.inter * inter_s
        slowest = inter_s if self.inter else (intra_s if self.intra else 0.0)
        return total, slowest


def stage_links(chip: ChipSpec, shape: InstanceShape) -> StageLinks:
    """``StageLinks`` of ``shape`` on ``chip``: scale-up within a domain, scale-out across."""
    inter = crossing_boundaries(chip, shape)
    return StageLinks(
        max(0, shape.pp - 1 - inter),
        inter,
        chip.scaleup_bytes_per_s,
        chip.scaleout_gbits_per_s * 1e9 / 8,
    )


class PipelinedPass(NamedTuple):
    """One pass through ``pp`` stages: ``periods`` stage times and the hand-off seconds in its
    latency, and the seconds after the first stage frees (``fill_s``; see the module
    docstring). ``latency = periods x stage_s + handoff_s``."""

    periods: int
    handoff_s: float
    fill_s: float


def prefill_pass(
    micro_batches: int, pp: int, stage_s: float, total_handoff_s: float, slowest_handoff_s: float
) -> PipelinedPass:
    """A prefill of ``micro_batches`` micro-batches of ``stage_s`` each (hand-offs apart).

    Latency: ``pp`` stages and every boundary for the first micro-batch, one period (stage plus
    slowest hand-off) for each further one. Occupancy: ``micro_batches`` periods.
    """
    periods = micro_batches + pp - 1
    handoff = total_handoff_s + (micro_batches - 1) * slowest_handoff_s
    latency = periods * stage_s + handoff
    occupancy = micro_batches * (stage_s + slowest_handoff_s)
    fill = latency - occupancy
    return PipelinedPass(periods, handoff, fill if fill > 0.0 else 0.0)


def decode_pass(pp: int, slowest_handoff_s: float) -> PipelinedPass:
    """A decode step: ``pp`` periods (its micro-batches fill the pipeline; the next step waits
    for this one's tokens, so nothing overlaps it)."""
    return PipelinedPass(pp, pp * slowest_handoff_s, 0.0)
