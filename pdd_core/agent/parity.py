"""``pdd parity``: the simulator and a live ``pdd up`` plane on the same workload, side by side.

A planner trusts the simulator's numbers only as far as the live data plane agrees with them.
This runs one scenario both ways: the simulator (``Scenario.run("pdd", ...)``) and a live plane
built from the scenario's own topology (one agent per P, RLD and MD instance, the timed engine
with the pools' chips and tensor parallelism, the WAN link's bandwidth and RTT, the scenario's
routing table and SLA), which gets the same requests at their arrival times and native sizes
through the OpenAI API (``pdd replay``'s client, sending token ids: the simulator has no
tokenizer, and tokenizing text would add the gateway's intake, ``bench/bench_intake.py``). KV
payloads travel at ``payload_scale`` of their size over a line emulated at the same fraction of
the link's bandwidth, so transfer times are the link's. It prints TTFT P50/P90/P99, TPOT P50,
the pipeline mix, the share of output tokens decoded on RLD and the WAN bytes, simulated and
live, with their ratio.

Limits, said plainly: the live engine runs one tensor-parallel degree for every role and no
pipeline parallelism, so a scenario whose pools differ in ``tp`` or use ``pp`` is refused; the
live plane's Python agents add their own processing delays, which the simulator does not model.
``timeline`` and ``traced`` put one request's live milestones (``agent.trace``) beside the
simulator's, to find where the two diverge.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from pdd_core.agent import hostload
from pdd_core.agent.hostload import Sched
from pdd_core.agent.replay import Result, replay
from pdd_core.metrics import percentile
from pdd_core.scenario import Scenario
from pdd_core.sim.records import SimulatedRequest
from pdd_core.specs.core import LinkKind, Role
from pdd_core.workload.request import Request

PIPELINES = ("P-MD", "P-RLD-MD", "P-RLD")
ROLES = ((Role.PREFILL, "prefill", "p"), (Role.RELAY_DECODE, "relay", "rld"),
         (Role.MAIN_DECODE, "main", "md"))  # fmt: skip


def plane_topology(scenario: Scenario, *, payload_scale: float = 0.001) -> dict[str, Any]:
    """A ``pdd up`` topology (the JSON of ``fixtures/dataplane``) for the scenario's PDD pools."""
    topology = scenario.pdd
    agents: list[dict[str, Any]] = []
    chips: dict[str, str] = {}
    degrees: set[int] = set()
    for role, name, prefix in ROLES:
        pools = topology.pools_of(role)
        if not pools:
            raise ValueError(f"pools: the scenario has no {role} pool")
        for pool in pools:
            if pool.pp != 1:
                raise ValueError(f"pools: {pool.role} uses pp={pool.pp}; the live engine has none")
            degrees.add(pool.tp)
            chips[name] = pool.chip
            for _ in range(pool.instances):
                agents.append({"id": f"{prefix}-{len([a for a in agents if a['role'] == name])}",
                               "role": name, "site": pool.site})  # fmt: skip
    if len(degrees) != 1:
        raise ValueError(f"pools: tp differs between roles ({sorted(degrees)}); the live engine "
                         "runs one tp")  # fmt: skip
    p_site = topology.pools_of(Role.PREFILL)[0].site
    md_site = topology.pools_of(Role.MAIN_DECODE)[0].site
    wan = topology.link_between(p_site, md_site)
    if wan is None or wan.kind is not LinkKind.WAN:
        raise ValueError(f"links: no WAN link between {p_site} and {md_site}")
    batch = scenario.config.max_batch
    return {
        "description": f"live plane of scenario {scenario.name} (pdd parity)",
        "model": scenario.model_id,
        "engine": {
            "kind": "timed",
            "model": scenario.model_id,
            "chips": chips,
            "tp": degrees.pop(),
            "time_scale": 1.0,
            "payload_scale": payload_scale,
            "block_size": scenario.config.block_size,
        },
        "routing": asdict(scenario.table),
        "sla": asdict(scenario.sla),
        "wan": {
            "bandwidth_gbps": wan.bandwidth_gbps * payload_scale,
            "rtt_ms": wan.rtt_ms,
            "jitter_ms": wan.jitter_ms,
            "initial_window_bytes": scenario.config.wan_initial_window_bytes,
            "seed": 1,
        },
        "limits": {
            "request_timeout_s": 600,
            "idle_timeout_s": 15,
            "connect_timeout_s": 3,
            "prefill_batch": 8,
            "decode_batch": batch,
            "relay_batch": batch,
            "p_cache_tokens": 4_000_000,
            "drc_tokens": 4_000_000,
            "default_max_tokens": 16,
        },
        "tenants": [],
        "journal": {"dir": "journal", "max_bytes": 20_000_000},
        "agents": [{"id": "gateway", "role": "gateway", "site": p_site}, *agents],
    }


@dataclass(frozen=True, slots=True)
class Side:
    """One side's figures (simulated or live)."""

    requests: int
    served: int
    ttft_s: tuple[float, float, float]  # P50, P90, P99
    tpot_p50_s: float
    mix: dict[str, float]  # share of served requests per pipeline
    rld_share: float  # share of output tokens decoded on RLD
    wan_bytes: float  # real (unscaled) bytes across the WAN


def _side(ttfts: Sequence[float], tpots: Sequence[float], pipelines: Sequence[str], *,
          rld: int, total: int, wan_bytes: float, requests: int) -> Side:  # fmt: skip
    served = len(pipelines)
    counts = Counter(pipelines)
    nan = math.nan
    return Side(
        requests=requests,
        served=served,
        ttft_s=tuple(percentile(ttfts, q) if ttfts else nan for q in (50, 90, 99)),  # type: ignore[arg-type]
        tpot_p50_s=percentile(tpots, 50) if tpots else nan,
        mix={p: counts[p] / served if served else 0.0 for p in PIPELINES},
        rld_share=rld / total if total else 0.0,
        wan_bytes=wan_bytes,
    )


def simulated(records: Sequence[SimulatedRequest]) -> Side:
    served = [r for r in records if not r.rejected]
    return _side(
        [r.ttft_s for r in served],
        [r.tpot_mean_s for r in served if r.output_tokens > 1],
        [r.pipeline for r in served],
        rld=sum(r.tokens_rld for r in served),
        total=sum(r.tokens_rld + r.tokens_md for r in served),
        wan_bytes=sum(r.wan_bytes for r in served),
        requests=len(records),
    )


def measured(results: Sequence[Result]) -> Side:
    """The live side's figures from the replay's results (WAN bytes as the API reports them:
    at the real size)."""
    served = [r for r in results if r.ok]
    return _side(
        [r.ttft_s for r in served if r.ttft_s is not None],
        [r.tpot_s for r in served if r.tpot_s is not None],
        [r.pipeline for r in served],
        rld=sum(r.pdd.rld_tokens for r in served),
        total=sum(r.pdd.rld_tokens + r.pdd.md_tokens for r in served),
        wan_bytes=sum(r.pdd.wan_bytes for r in served),
        requests=len(results),
    )


def table(sim: Side, live: Side) -> str:
    """The side-by-side table with live / simulated ratios (or differences for shares)."""

    def row(name: str, a: float, b: float, unit: str, *, share: bool = False) -> str:
        if share:
            return f"{name:<22}{a:>11.1%}{b:>11.1%}{(b - a) * 100:>+10.1f} pt"
        ratio = b / a if a else math.nan
        return f"{name:<22}{a:>10.3f}{unit}{b:>10.3f}{unit}{ratio:>10.2f}x"

    lines = [f"{'':<22}{'simulated':>11}{'live':>11}{'live/sim':>13}",
             f"{'requests served':<22}{sim.served:>11}{live.served:>11}"]  # fmt: skip
    for q, a, b in zip((50, 90, 99), sim.ttft_s, live.ttft_s, strict=True):
        lines.append(row(f"TTFT P{q} (s)", a, b, " "))
    lines.append(row("TPOT P50 (s)", sim.tpot_p50_s, live.tpot_p50_s, " "))
    for pipeline in PIPELINES:
        lines.append(row(f"mix {pipeline}", sim.mix[pipeline], live.mix[pipeline], "",
                         share=True))  # fmt: skip
    lines.append(row("RLD token share", sim.rld_share, live.rld_share, "", share=True))
    lines.append(row("WAN GB", sim.wan_bytes / 1e9, live.wan_bytes / 1e9, " "))
    return "\n".join(lines)


# A request's milestones, in order: (label, live milestone, the simulator's record offsets).
MILESTONES: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("gateway has the request", "gateway_received", ()),
    ("prompt tokenized", "gateway_tokenized", ()),
    ("routed", "gateway_routed", ()),
    ("GENERATE sent", "gateway_generate_sent", ()),
    ("P has GENERATE", "p_generate", ()),
    ("prefill starts", "p_prefill_start", ("queue_s",)),
    ("MD answered KV_QUERY", "p_kv_have", ()),
    ("prefill ends", "p_prefill_end", ("queue_s", "prefill_s")),
    ("P wrote its KV", "p_kv_written", ()),
    ("RLD has the KV", "rld_kv_done", ("queue_s", "prefill_s", "transfer_s")),
    ("MD has the KV", "md_kv_done", ("queue_s", "prefill_s", "transfer_s")),
    ("RLD first token", "rld_first_token", ()),
    ("MD first token", "md_first_token", ()),
    ("gateway first token", "gateway_first_token", ()),
    ("client first token", "", ("ttft_s",)),
)


def timeline(record: SimulatedRequest, result: Result, marks: dict[str, float]) -> str:
    """One request's milestones, seconds after the client sent it, simulated beside live.

    The simulator has no HTTP, tokenizer or frames: its rows are the queue, the prefill, the
    KV transfer that gates the first token, and the first token."""
    lines = [f"request {record.id} ({record.input_tokens} tokens, {record.hit_tokens_p} hit "
             f"simulated): {record.pipeline} simulated, {result.pipeline} live",
             f"{'milestone':<24}{'simulated':>11}{'live':>11}"]  # fmt: skip
    for label, milestone, offsets in MILESTONES:
        sim = sum(getattr(record, name) for name in offsets) if offsets else math.nan
        if not milestone:
            live = result.ttft_s if result.ttft_s is not None else math.nan
        else:
            live = marks[milestone] - result.sent_at if milestone in marks else math.nan
        if math.isnan(sim) and math.isnan(live):
            continue
        sim_cell, live_cell = ("-" if math.isnan(v) else f"{v:.3f} s" for v in (sim, live))
        lines.append(f"{label:<24}{sim_cell:>11}{live_cell:>11}")
    return "\n".join(lines)


def traced(
    requests: Sequence[Request],
    records: Sequence[SimulatedRequest],
    results: Sequence[Result],
    logs: Sequence[Path],
) -> str:
    """The timelines of the requests at the live P50 and P90 TTFT (``PDD_TRACE`` marks)."""
    from pdd_core.agent.trace import read_marks

    marks = read_marks(logs)
    by_id = {r.id: r for r in records}
    pairs = [(by_id[req.id], res) for req, res in zip(requests, results, strict=True)
             if res.ok and res.ttft_s is not None and res.request_id in marks]  # fmt: skip
    if not pairs:
        return "trace: no traced request"
    pairs.sort(key=lambda pair: pair[1].ttft_s or 0.0)
    chosen = {pairs[len(pairs) // 2][0].id: "P50", pairs[(len(pairs) * 9) // 10][0].id: "P90"}
    blocks = []
    for record, result in pairs:
        if record.id in chosen:
            blocks.append(f"live TTFT {chosen[record.id]}: "
                          + timeline(record, result, marks[result.request_id]))  # fmt: skip
    return "\n\n".join(blocks)


def run_live(
    scenario: Scenario, requests: list[Request], run_dir: Path, *, payload_scale: float
) -> tuple[list[Result], Sched | None]:
    """Start the scenario's live plane, replay ``requests`` at native size, stop it; the
    results, and how long the plane's and this client's threads waited for a CPU meanwhile
    (``hostload``; None where the kernel does not say)."""
    from pdd_core.agent.supervisor.plane import DataPlane

    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir / "topology.json"
    path.write_text(json.dumps(plane_topology(scenario, payload_scale=payload_scale), indent=2))
    plane = DataPlane(path, run_dir / "run")
    plane.start(timeout_s=120)
    pids = [*plane.pids().values(), os.getpid()]
    try:
        before = hostload.sample(pids)
        summary = asyncio.run(
            replay(requests, gateway=plane.gateway_url, api_key=plane.api_key,
                   model=plane.config.model, speed=1.0, block_tokens=512, output_scale=1.0,
                   max_output=0, timeout_s=600, token_ids=True)
        )  # fmt: skip
        waited = hostload.between(before, hostload.sample(pids))
    finally:
        plane.stop()
    return summary.results, waited


def host_line(waited: Sched | None) -> str:
    """The run's CPU waits in one line (``tests/system/test_parity.py`` reads it)."""
    if waited is None:
        return "host CPU wait: not measured (no /proc/<pid>/task/<tid>/schedstat)"
    return (f"host CPU wait: {waited.wait_per_slice_ms:.3f} ms per time slice "
            f"({waited.wait_s:.2f} s waited, {waited.cpu_s:.2f} s on a CPU, {waited.slices} "
            f"slices in {waited.wall_s:.0f} s: the plane's and the client's threads)")  # fmt: skip
