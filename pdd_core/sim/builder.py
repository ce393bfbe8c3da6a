"""Turn a topology's pools into simulated instances and links for one policy."""

from __future__ import annotations

from dataclasses import dataclass

from pdd_core import perf
from pdd_core.cache import RadixCache
from pdd_core.sim.config import Policy, SimConfig, colocated_pools
from pdd_core.sim.instance import Host, Instance
from pdd_core.sim.wan import WanLine
from pdd_core.specs import LinkKind, LinkSpec, ModelSpec, PoolSpec, RldMode, Role, Topology
from pdd_core.transfer import Rng


@dataclass(frozen=True, slots=True)
class Built:
    """The instances of each role and the links a policy uses."""

    prefill: list[Instance]
    relay: list[Instance]
    decode: list[Instance]
    rdma: LinkSpec | None
    wan: WanLine | None


def build_instances(
    host: Host,
    topology: Topology,
    policy: Policy,
    *,
    model: ModelSpec,
    config: SimConfig,
    rng: Rng,
) -> Built:
    """Instances per role (``colocated`` puts every instance in ``prefill``, serving both)."""

    def make(pools: tuple[PoolSpec, ...], role: Role | None, cache: str) -> list[Instance]:
        return _instances(host, topology, pools, role=role, model=model, config=config, cache=cache)

    if policy is Policy.COLOCATED:
        prefill = make(colocated_pools(topology), None, "prefix")
        if not prefill:
            raise ValueError("pools: colocated needs at least one instance")
        return Built(prefill, [], [], None, None)
    prefill = make(topology.pools_of(Role.PREFILL), Role.PREFILL, "prefix")
    relay = []
    if policy is Policy.PDD and topology.rld_mode is RldMode.SHARED:
        relay = prefill  # relay slots time-share the P instances (no RLD pool)
    elif policy is Policy.PDD:
        relay = make(topology.pools_of(Role.RELAY_DECODE), Role.RELAY_DECODE, "")
    drc = "drc" if policy is Policy.PDD and config.drc else ""
    decode = make(topology.pools_of(Role.MAIN_DECODE), Role.MAIN_DECODE, drc)
    if not prefill or not decode:
        raise ValueError(f"pools: {policy} needs P and MD (decode) instances")
    if policy is Policy.PDD and not relay:
        raise ValueError("pools: pdd needs at least one RLD instance")
    p_site = topology.pools_of(Role.PREFILL)[0].site
    d_site = topology.pools_of(Role.MAIN_DECODE)[0].site
    rdma = _link(topology, p_site, p_site, LinkKind.RDMA)
    wan = None
    if policy in (Policy.NAIVE_CROSS_DC, Policy.PDD):
        if p_site == d_site:
            raise ValueError(f"pools: {policy} needs MD in another site than P")
        spec = _link(topology, p_site, d_site, LinkKind.WAN)
        wan = WanLine(
            host,
            spec,
            rng,
            config.wan_bin_s,
            setup_s=config.wan_setup_ms / 1000.0,
            initial_window_bytes=config.wan_initial_window_bytes,
        )
    elif policy is Policy.SAME_DC and p_site != d_site:
        raise ValueError("pools: same-dc needs P and D in one site")
    return Built(prefill, relay, decode, rdma, wan)


def _link(topology: Topology, a: str, b: str, kind: LinkKind) -> LinkSpec:
    link = topology.link_between(a, b)
    if link is None or link.kind is not kind:
        raise ValueError(f"links: no {kind} link between {a!r} and {b!r}")
    return link


def _instances(
    host: Host,
    topology: Topology,
    pools: tuple[PoolSpec, ...],
    *,
    role: Role | None,
    model: ModelSpec,
    config: SimConfig,
    cache: str,
) -> list[Instance]:
    instances = []
    for pool in pools:
        chip = topology.chips[pool.chip]
        capacity = perf.kv_capacity_tokens(model, chip, pool.shape)
        if capacity <= 0:
            raise ValueError(
                f"pools: {model.id} does not fit on {pool.shape.label()} x {chip.id} "
                f"(site {pool.site})"
            )
        for number in range(pool.instances):
            radix = None
            kv_tokens = capacity
            if cache == "prefix":
                size = config.prefix_cache_tokens
                radix = RadixCache(capacity if size is None else size, config.block_size)
            elif cache == "drc":
                drc_tokens = int(capacity * config.drc_fraction)
                radix = RadixCache(drc_tokens, config.block_size)
                kv_tokens = capacity - drc_tokens
            instances.append(
                Instance(
                    host,
                    name=f"{pool.site}/{pool.role}/{pool.chip}#{number}",
                    role=role,
                    model=model,
                    chip=chip,
                    tp=pool.shape,
                    kv_tokens=kv_tokens,
                    max_batch=config.max_batch,
                    chunk_tokens=pool.chunk_tokens or config.prefill_chunk_tokens,
                    cache=radix,
                    shares_pool=cache == "prefix" and role is None,
                )
            )
    return instances
