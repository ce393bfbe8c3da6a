"""Policies and the engine-level settings of a simulation run.

The four policies of the issue (DOMAIN.md sections 2-4) differ in which pools serve and how the
KV moves; ``policy_topology`` derives, from one scenario, the topology each policy runs on, so
``pdd compare`` puts every design on the same workload and prices each by its own chips.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum

from pdd_core.specs import PoolSpec, Role, Topology
from pdd_core.transfer import IW10_BYTES


class Policy(StrEnum):
    """``colocated``: prefill and decode on one instance (chunked prefill), baseline chips.
    ``same-dc``: classic PD in one site, the whole KV over RDMA, baseline chips.
    ``naive-cross-dc``: classic PD with P in site A and D in site B, the whole KV over the WAN.
    ``pdd``: P and RLD in A, MD in B, dual-path transfer, routing, handoff, DRC at MD."""

    COLOCATED = "colocated"
    SAME_DC = "same-dc"
    NAIVE_CROSS_DC = "naive-cross-dc"
    PDD = "pdd"


POLICIES: tuple[Policy, ...] = (
    Policy.COLOCATED,
    Policy.SAME_DC,
    Policy.NAIVE_CROSS_DC,
    Policy.PDD,
)


@dataclass(frozen=True, slots=True)
class SimConfig:
    """Engine settings shared by every instance of a run (not physics: serving choices).

    - ``prefill_chunk_tokens``: token budget of one prefill pass (chunked prefill).
    - ``max_batch``: most sequences a decode instance runs at once.
    - ``prefix_cache_tokens``: prefix cache of each P (and colocated) instance in tokens; None
      means the instance's HBM KV capacity. Mooncake-style stores keep it in host DRAM, which is
      why a scenario may set it above the HBM figure.
    - ``drc``: decode-side radix cache at MD (pdd only); ``drc_fraction`` is the share of MD's
      KV capacity given to it, the rest holds running sequences.
    - ``block_size``: tokens per block hash of the workload (512 for Mooncake traces).
    - ``wan_bin_s``: width of the WAN utilisation time bins (peak Gbps is over these bins).
    - ``seed``: seeds link jitter (and the generator, when the scenario uses it).
    - ``wan_setup_ms``: fixed setup of each WAN transfer (block lookup, registration, request
      message), paid on top of the round trip; it uses no bandwidth. Default 0: the transfer's
      request message is the one round trip already charged, and connections are pooled (no
      handshake per transfer).
    - ``wan_initial_window_bytes``: TCP initial congestion window of a WAN transfer. Default
      ``IW10_BYTES``, RFC 6928's initial window of 10 segments of a 1,460-byte MSS (Linux's
      default since 2.6.39): Linux also defaults to ``net.ipv4.tcp_slow_start_after_idle = 1``
      (RFC 2861 / RFC 7661 congestion-window validation), which restarts a pooled connection
      from that window once it has been idle longer than its retransmission timeout (at least
      200 ms), so a handoff between two requests' turns pays slow start. 0 means connections
      stay warm (``tcp_slow_start_after_idle = 0``) and no transfer pays it.
    - ``closed_loop``: a session's next turn arrives when its previous turn has ended plus
      the trace's gap between them (tool/think time; ``pdd_core.sim.sessions``), instead of
      at its trace time.
    """

    prefill_chunk_tokens: int = 16_384
    max_batch: int = 128
    prefix_cache_tokens: int | None = None
    drc: bool = True
    drc_fraction: float = 0.5
    block_size: int = 512
    wan_bin_s: float = 10.0
    seed: int = 0
    wan_setup_ms: float = 0.0
    wan_initial_window_bytes: float = IW10_BYTES
    closed_loop: bool = False

    def __post_init__(self) -> None:
        for name in ("prefill_chunk_tokens", "max_batch", "block_size"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name}: must be a positive integer, got {value!r}")
        if self.prefix_cache_tokens is not None and self.prefix_cache_tokens < 0:
            raise ValueError("prefix_cache_tokens: must be non-negative")
        if not 0 < self.drc_fraction < 1:
            raise ValueError(f"drc_fraction: must be in (0, 1), got {self.drc_fraction!r}")
        if not self.wan_bin_s > 0:
            raise ValueError("wan_bin_s: must be positive")
        if not isinstance(self.closed_loop, bool):
            raise ValueError(f"closed_loop: must be true or false, got {self.closed_loop!r}")
        for name in ("wan_setup_ms", "wan_initial_window_bytes"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                raise ValueError(f"{name}: must be a non-negative number, got {value!r}")

    def with_drc(self, drc: bool) -> SimConfig:
        return replace(self, drc=drc)


def policy_topology(policy: Policy | str, pdd: Topology, baseline: Topology) -> Topology:
    """The topology ``policy`` runs on: PDD's pools, PDD's without RLD, or the baseline's.

    ``naive-cross-dc`` is classic PD stretched over the same sites and chips as PDD, without
    the relay pool (so it also costs less). ``same-dc`` and ``colocated`` run on the baseline.
    """
    policy = Policy(policy)
    if policy is Policy.PDD:
        return pdd
    if policy is Policy.NAIVE_CROSS_DC:
        pools = tuple(p for p in pdd.pools if p.role is not Role.RELAY_DECODE)
        return replace(pdd, pools=pools)
    return baseline


def colocated_pools(baseline: Topology) -> tuple[PoolSpec, ...]:
    """Every baseline instance, whatever its role, serves both phases under ``colocated``."""
    return tuple(p for p in baseline.pools if p.instances > 0)
