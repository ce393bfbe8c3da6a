"""The gateway routes with pdd_core.routing over its live view of the caches.

No sockets: the view is filled as CACHE_EVENT frames would fill it, and every agent is
reported reachable.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from pdd_core.agent.config import load_config
from pdd_core.agent.gateway import Gateway
from pdd_core.agent.protocol import FrameType, control
from pdd_core.agent.supervisor import resolve
from pdd_core.engine.protocol import block_hashes
from pdd_core.routing import Pipeline

TINY = Path(__file__).resolve().parents[3] / "fixtures" / "dataplane" / "tiny.json"


@pytest.fixture
def gateway(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Gateway:
    config, _ = resolve(load_config(TINY), tmp_path)
    gw = Gateway(config, "gateway")
    monkeypatch.setattr(gw, "up", lambda role: [a.id for a in config.of_role(role)])
    return gw


async def cache_event(gw: Gateway, agent: str, added: list[int]) -> None:
    await gw._on_frame(agent, control(FrameType.CACHE_EVENT, "", {"added": added}))


async def test_a_long_prompt_with_a_short_answer_is_singular(gateway: Gateway) -> None:
    route = gateway.route(list(range(500)), 2, {})

    assert (route.pipeline, route.relay, route.main) == (Pipeline.P_RLD, "rld-0", None)


async def test_a_prefix_held_by_md_goes_p_md_and_a_cold_long_one_is_relayed(
    gateway: Gateway,
) -> None:
    prompt = [i % 250 for i in range(320)]
    cold = gateway.route(prompt, 16, {})
    await cache_event(gateway, "md-1", block_hashes(prompt, 16))
    await cache_event(gateway, "p-1", block_hashes(prompt, 16))
    warm = gateway.route(prompt, 16, {})

    assert cold.pipeline is Pipeline.P_RLD_MD  # 320 tokens x 512 B over 50 Mbps > 30 ms
    assert (warm.pipeline, warm.main, warm.prefill) == (Pipeline.P_MD, "md-1", "p-1")
    assert warm.hit_tokens_md == warm.hit_tokens_p == 320


async def test_the_queue_of_reserved_prefills_leads_to_429(gateway: Gateway) -> None:
    gateway.config = replace(gateway.config, prefill_s_per_token=0.01)
    gateway.predictor._config = gateway.config  # 100 tokens -> 1 s of predicted prefill
    routes = [gateway.route(list(range(100)), 4, {}) for _ in range(30)]

    admitted = [r for r in routes if not r.rejected]
    assert {r.prefill for r in admitted} == {"p-0", "p-1"}
    assert routes[-1].rejected and routes[-1].retry_after_s >= 1
    for route in admitted:
        gateway.release(route)
        gateway.release(route)  # idempotent
    assert gateway.queued_s == dict.fromkeys(gateway.queued_s, 0.0)


async def test_a_forced_pipeline_needs_the_configs_permission(gateway: Gateway) -> None:
    prompt = list(range(20))
    forced = gateway.route(prompt, 16, {"pipeline": "P-RLD-MD"})
    gateway.config = replace(gateway.config, allow_route_override=False)
    ignored = gateway.route(prompt, 16, {"pipeline": "P-RLD-MD"})

    assert forced.pipeline is Pipeline.P_RLD_MD
    assert ignored.pipeline is Pipeline.P_MD
