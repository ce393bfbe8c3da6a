"""Collective communication of a forward pass: TP all-reduce and expert all-to-all.

``perf`` charges these inside each pipeline stage. All-reduce costs come from a measured table
(small messages are latency-bound, far from the link's bandwidth), all-to-all from bytes over the
scale-up fabric or, when the expert group spans more than one scale-up domain, over each chip's
scale-out NIC. ``docs/physics.md`` lists the sources.
"""

from __future__ import annotations

import bisect
import itertools
import math

from pdd_core.specs import ChipSpec, InstanceShape, ModelSpec

# Activations cross the scale-up link in BF16 (2 bytes) in every mainstream serving engine,
# whatever the weight format.
ACTIVATION_BYTES = 2.0

# Measured all-reduce latency on 8 x H100 (SGLang custom all-reduce, CUDA-graph free, PR
# sgl-project/sglang#2904): message bytes -> seconds for tp 2 / 4 / 8. Below the first point the
# first value holds; between points log-linear interpolation; above 1 MiB the excess bytes move
# at ALLREDUCE_BUS_EFFICIENCY of the scale-up bandwidth. Other chips scale the part above the
# smallest message's latency by 450 GB/s / their scale-up bandwidth.
ALLREDUCE_MEASURED_H100: dict[int, tuple[tuple[int, float], ...]] = {
    2: ((512, 3.7e-6), (4096, 3.9e-6), (32768, 4.5e-6), (262144, 7.9e-6), (524288, 12.5e-6),
        (1048576, 19.9e-6)),
    4: ((512, 4.8e-6), (4096, 3.7e-6), (32768, 4.8e-6), (262144, 13.9e-6), (524288, 20.2e-6),
        (1048576, 31.1e-6)),
    8: ((512, 5.9e-6), (4096, 5.7e-6), (32768, 7.8e-6), (262144, 16.7e-6), (524288, 22.1e-6),
        (1048576, 33.8e-6)),
}  # fmt: skip
ALLREDUCE_REFERENCE_GBYTES_PER_S = 450.0
# Large NCCL all-reduces on NVLink reach about 0.8 of the link's per-direction bandwidth as bus
# bandwidth (nccl-tests all_reduce_perf busbw on 8 x H100); an assumption for other fabrics.
ALLREDUCE_BUS_EFFICIENCY = 0.8

# One all-to-all (MoE dispatch or combine) or pipeline hand-off costs at least this much: a
# network round of RDMA writes plus the kernel (DeepEP low-latency dispatch on H800: ~150-200 us
# for 128 tokens over 8-256 ranks across nodes; inside a node tens of us).
ALLTOALL_LATENCY_S = 20e-6
SEND_LATENCY_S = 10e-6


def allreduce_time(chip: ChipSpec, tp: int, message_bytes: float) -> float:
    """One all-reduce of ``message_bytes`` over ``tp`` ranks of ``chip``'s scale-up fabric.

    Interpolates the measured H100 table (``ALLREDUCE_MEASURED_H100``, the nearest tp column at
    or above ``tp``, 8 beyond) in log message size; the part above its smallest-message latency
    scales with 450 GB/s over the chip's scale-up bandwidth; beyond 1 MiB the extra bytes cost
    ``2 (tp-1)/tp x bytes / (ALLREDUCE_BUS_EFFICIENCY x scale-up)``. Zero for ``tp = 1``.
    """
    return AllReduce(chip, tp).seconds(message_bytes)


class AllReduce:
    """``allreduce_time`` of one chip and tp degree, with the table's constants read once (a
    roofline evaluates it per pass): the same operations on the same values."""

    __slots__ = ("_big", "_floor_s", "_log_steps", "_rate", "_scale", "_sizes", "_table", "tp")

    def __init__(self, chip: ChipSpec, tp: int) -> None:
        self.tp = tp
        column = next((t for t in (2, 4, 8) if t >= tp), 8)
        table = ALLREDUCE_MEASURED_H100[column]
        self._table = table
        self._floor_s = table[0][1]
        self._scale = ALLREDUCE_REFERENCE_GBYTES_PER_S / chip.scaleup_gbytes_per_s
        self._sizes = [size for size, _ in table]
        # Beyond the table: its last point, scaled, and the rate the extra bytes move at.
        self._big = self._floor_s + (table[-1][1] - self._floor_s) * self._scale
        self._rate = ALLREDUCE_BUS_EFFICIENCY * chip.scaleup_bytes_per_s
        self._log_steps = [0.0] + [
            math.log(s1 / s0) for (s0, _), (s1, _) in itertools.pairwise(table)
        ]

    def seconds(self, message_bytes: float) -> float:
        """Seconds of one all-reduce of ``message_bytes`` (``allreduce_time``)."""
        tp = self.tp
        if tp <= 1 or message_bytes <= 0:
            return 0.0
        sizes = self._sizes
        floor_s = self._floor_s
        if message_bytes <= sizes[0]:
            return floor_s
        if message_bytes >= sizes[-1]:
            extra = 2.0 * (tp - 1) / tp * (message_bytes - sizes[-1])
            return self._big + extra / self._rate
        i = bisect.bisect_left(sizes, message_bytes)
        (s0, t0), (_, t1) = self._table[i - 1], self._table[i]
        frac = math.log(message_bytes / s0) / self._log_steps[i]
        measured = t0 + (t1 - t0) * frac
        return floor_s + max(measured - floor_s, 0.0) * self._scale


def alltoall_time(model: ModelSpec, chip: ChipSpec, shape: InstanceShape, tokens: float) -> float:
    """One MoE dispatch (or combine) all-to-all of a micro-batch over the ``ep`` ranks.

    Each chip sends its share of the tokens, ``tokens / (tp x dp)``, to ``top_k`` experts, of
    which ``1 - 1/ep`` live elsewhere: ``bytes / link + ALLTOALL_LATENCY_S``. The link is the
    scale-up fabric while the expert group fits one domain, else the chip's scale-out NIC.
    """
    link = chip.scaleup_bytes_per_s
    if shape.stage_chips > chip.scaleup_domain:
        link = chip.scaleout_gbits_per_s * 1e9 / 8
    per_chip = tokens / shape.stage_chips * model.moe_top_k * model.hidden_size * ACTIVATION_BYTES
    return ALLTOALL_LATENCY_S + per_chip * (1 - 1 / shape.ep) / link
