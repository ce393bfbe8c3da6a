"""The gateway routes with pdd_core.routing over its live view of the caches.

No sockets: the view is filled as CACHE_EVENT frames would fill it, and every agent is
reported reachable.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from pdd_core.agent.config import load_config
from pdd_core.agent.gateway.server import Gateway
from pdd_core.agent.protocol import FrameType, control
from pdd_core.agent.supervisor.plane import resolve
from pdd_core.engine.protocol import block_hashes
from pdd_core.routing import Pipeline

TINY = Path(__file__).resolve().parents[3] / "fixtures" / "dataplane" / "tiny.json"


def make_gateway(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, **changes: Any) -> Gateway:
    """The tiny plane's gateway (config fields changed by ``changes``), every agent up."""
    config, _ = resolve(load_config(TINY), tmp_path)
    config = replace(config, **changes)
    gw = Gateway(config, "gateway")
    monkeypatch.setattr(gw, "up", lambda role: [a.id for a in config.of_role(role)])
    return gw


@pytest.fixture
def gateway(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Gateway:
    return make_gateway(monkeypatch, tmp_path)


async def cache_event(gw: Gateway, agent: str, added: list[int]) -> None:
    await gw.on_frame(agent, control(FrameType.CACHE_EVENT, "", {"added": added}))


async def test_a_long_prompt_with_a_short_answer_is_singular(gateway: Gateway) -> None:
    route = gateway.router.route(list(range(500)), 2, {})

    assert (route.pipeline, route.relay, route.main) == (Pipeline.P_RLD, "rld-0", None)


async def test_a_prefix_held_by_md_goes_p_md_and_a_cold_long_one_is_relayed(
    gateway: Gateway,
) -> None:
    prompt = [i % 250 for i in range(320)]
    cold = gateway.router.route(prompt, 16, {})
    await cache_event(gateway, "md-1", block_hashes(prompt, 16))
    await cache_event(gateway, "p-1", block_hashes(prompt, 16))
    warm = gateway.router.route(prompt, 16, {})

    assert cold.pipeline is Pipeline.P_RLD_MD  # 320 tokens x 512 B over 50 Mbps > 30 ms
    assert (warm.pipeline, warm.main, warm.prefill) == (Pipeline.P_MD, "md-1", "p-1")
    assert warm.hit_tokens_md == warm.hit_tokens_p == 320


async def test_the_queue_of_reserved_prefills_leads_to_429(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # 100 tokens -> 1 s of predicted prefill
    gateway = make_gateway(monkeypatch, tmp_path, prefill_s_per_token=0.01)
    routes = [gateway.router.route(list(range(100)), 4, {}) for _ in range(30)]

    admitted = [r for r in routes if not r.rejected]
    assert {r.prefill for r in admitted} == {"p-0", "p-1"}
    assert routes[-1].rejected
    assert routes[-1].retry_after_s >= 1
    for route in admitted:
        gateway.router.release(route)
        gateway.router.release(route)  # idempotent
    assert gateway.router.queued_s == dict.fromkeys(gateway.router.queued_s, 0.0)


async def test_a_resume_is_refused_for_want_of_an_agent_never_for_its_predicted_ttft(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # Given: P queues so long that a new request's predicted TTFT breaks the target.
    gateway = make_gateway(monkeypatch, tmp_path, prefill_s_per_token=0.01)
    while not gateway.router.route(list(range(100)), 4, {}).rejected:
        pass

    # When: a request admitted before (its client holds tokens) resumes after a lost agent.
    resumed = gateway.router.route(list(range(100)), 4, {}, resuming=True)
    # Then: it runs; with no decode slot anywhere it would still be refused.
    gateway.router.admission.held = dict(gateway.router.admission.capacity)
    starved = gateway.router.route(list(range(100)), 4, {}, resuming=True)

    assert not resumed.rejected
    assert (starved.rejected, starved.reason) == (True, "no decode slot free")


async def test_a_forced_pipeline_needs_the_configs_permission(gateway: Gateway) -> None:
    prompt = list(range(20))
    forced = gateway.router.route(prompt, 16, {"pipeline": "P-RLD-MD"})
    gateway.config = replace(gateway.config, allow_route_override=False)
    ignored = gateway.router.route(prompt, 16, {"pipeline": "P-RLD-MD"})

    assert forced.pipeline is Pipeline.P_RLD_MD
    assert ignored.pipeline is Pipeline.P_MD


async def test_the_gateway_decides_as_pdd_core_predict_does_on_the_same_state(
    gateway: Gateway,
) -> None:
    from pdd_core.estimates import DecodeState, LinkState, PrefillState
    from pdd_core.predict import predict

    # Given: a prefix held by p-1 and md-1, and one request already routed (a queued prefill,
    # decode slots held and, its prefill reported ended, a WAN flow in flight).
    shared = [i % 250 for i in range(320)]
    await cache_event(gateway, "p-1", block_hashes(shared, 16))
    await cache_event(gateway, "md-1", block_hashes(shared, 16))
    earlier = gateway.router.route(list(range(1, 200)), 16, {})
    gateway.router.flow_starts(earlier, 199)
    prompt = [*shared, *range(40)]

    # When: the gateway routes, and predict() gets the state the simulator would fill.
    route = gateway.router.route(prompt, 16, {})
    per_token = gateway.config.prefill_s_per_token
    queued = dict.fromkeys(("p-0", "p-1"), 0.0)
    queued[earlier.prefill] = earlier.prefill_s
    held = dict.fromkeys(("rld-0", "md-0", "md-1"), 0)
    for agent in (earlier.relay, earlier.main):
        if agent is not None:
            held[agent] += 1
    step = gateway.config.engine.decode_step_s
    limits = gateway.config.limits

    def decoder(agent: str, hit: int, batch: int) -> DecodeState:
        return DecodeState(held[agent], batch, 1 << 62, step_s=step if held[agent] else 0.0,
                           hit_tokens=hit)  # fmt: skip

    expected = predict(
        input_tokens=360,
        output_tokens=16,
        prefills=[
            PrefillState(queued["p-0"], 0, 360 * per_token),
            PrefillState(queued["p-1"], 320, 40 * per_token),
        ],
        mains=[decoder("md-0", 0, limits.decode_batch), decoder("md-1", 320, limits.decode_batch)],
        relays=[decoder("rld-0", 0, limits.relay_batch)],
        wan=LinkState(
            gateway.config.wan.bandwidth_gbps,
            gateway.config.wan.rtt_ms,
            flows=1 if earlier.main else 0,
            initial_window_bytes=gateway.config.wan_window_wire_bytes,
        ),
        rdma=None,
        kv_bytes_per_token=gateway.router.predictor.kv_bytes_per_token,
        table=gateway.config.routing,
        sla=gateway.config.sla,
    )

    # Then: the same P, MD, relay, pipeline, predicted TTFT and admission.
    assert route.pipeline is expected.pipeline
    assert route.prefill == ("p-0", "p-1")[expected.prefill_index]
    assert route.main == (("md-0", "md-1")[expected.md_index] if route.main else None)
    assert route.predicted_ttft_s == expected.predicted_ttft_s
    assert route.rejected is expected.rejected
    assert (route.hit_tokens_p, route.hit_tokens_md) == (320, 320)


async def test_a_kv_transfer_is_on_the_line_from_the_end_of_its_prefill_until_it_lands(
    gateway: Gateway,
) -> None:
    # As the simulator's line counts it: not while the request queues or prefills.
    first = gateway.router.route(list(range(100)), 16, {"pipeline": "P-MD"})
    second = gateway.router.route(list(range(200)), 16, {"pipeline": "P-MD"})
    routed = gateway.router._wan_state().flows

    gateway.router.flow_starts(first, 100)
    gateway.router.flow_starts(second, 200)
    both = gateway.router._wan_state().flows
    gateway.router.flow_ends(first)
    gateway.router.flow_ends(first)  # idempotent
    one = gateway.router._wan_state().flows
    gateway.router.release(second)  # a request that ends before its KV landed leaves the line too

    assert (routed, both, one, gateway.router._wan_state().flows) == (0, 2, 1, 0)
    assert (
        gateway.router.admission.held["md-0"] + gateway.router.admission.held["md-1"] == 1
    )  # first's slot


async def test_at_the_end_of_prefill_a_crowded_line_relays_a_p_md_route_as_the_simulator_does(
    gateway: Gateway,
) -> None:
    from pdd_core.estimates import DecodeState
    from pdd_core.predict import relay_at_prefill_end

    # Given: a P-MD route (md-0 holds all but 16 of its 320 tokens: 8 KB at 50 Mbps, 11.3 ms
    # alone on the line with its round trip, 23 ms as the tenth flow) whose prefill ends
    # 4.985 s after its arrival (the target is 5 s).
    prompt = [i % 250 for i in range(320)]
    await cache_event(gateway, "md-0", block_hashes(prompt[:304], 16))
    route = gateway.router.route(prompt, 16, {})
    others = [gateway.router.route(list(range(1, 30)), 16, {"pipeline": "P-MD"}) for _ in range(9)]
    assert (route.pipeline, route.main, route.forced) == (Pipeline.P_MD, "md-0", False)

    # When: it is checked on a quiet line, then with the 9 others' KV on the line.
    quiet = gateway.router.recheck(route, 320, 4.985)
    for other in others:
        gateway.router.flow_starts(other, 29)
    crowded = gateway.router.recheck(route, 320, 4.985)

    # Then: quiet, P-MD stands; crowded, P-RLD-MD through rld-0, whose slot is now held.
    assert quiet == route
    assert (crowded.pipeline, crowded.relay) == (Pipeline.P_RLD_MD, "rld-0")
    assert (crowded.main, crowded.ticket, crowded.prefill) == (
        route.main,
        route.ticket,
        route.prefill,
    )
    assert gateway.router.admission.held["rld-0"] == 1
    held = gateway.router.admission.held[route.main]
    step = gateway.router.predictor.decode_step_s("main", held)
    expected = relay_at_prefill_end(
        4.985, input_tokens=320,
        main=DecodeState(held, gateway.config.limits.decode_batch, 1 << 62, step_s=step,
                         hit_tokens=304),
        relays=[DecodeState(0, gateway.config.limits.relay_batch, 1 << 62)],
        wan=gateway.router._wan_state(), rdma=None,
        kv_bytes_per_token=gateway.router.predictor.kv_bytes_per_token, sla=gateway.config.sla,
    )  # fmt: skip
    assert expected == 0
    gateway.router.release(crowded)
    assert gateway.router.admission.held["rld-0"] == 0
    assert gateway.router.admission.held[route.main] == held - 1


def test_with_no_decode_stage_the_error_names_it_and_why_each_agent_is_out(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from pdd_core.agent.gateway.types import UpstreamError
    from pdd_core.agent.runtime import PeerLink

    config, _ = resolve(load_config(TINY), tmp_path)
    gw = Gateway(config, "gateway")
    monkeypatch.setattr(PeerLink, "up", property(lambda self: True))  # every socket connected
    gw.probe.unreachable.update({"md-0", "md-1"})  # a blackholed WAN: silent on the probe
    gw.avoid.add("rld-0")

    with pytest.raises(UpstreamError) as raised:
        gw.router.route(list(range(40)), 4, {})

    assert str(raised.value) == (
        "no decode agent (relay or main decode) is reachable (rld-0: failed this request; "
        "md-0: silent for over 1.5 s (WAN probe); md-1: silent for over 1.5 s (WAN probe))"
    )


def test_with_no_prefill_agent_connected_the_error_says_so(tmp_path: Path) -> None:
    from pdd_core.agent.gateway.types import UpstreamError

    config, _ = resolve(load_config(TINY), tmp_path)
    gw = Gateway(config, "gateway")  # never started: no connection is up

    with pytest.raises(
        UpstreamError,
        match=r"^no prefill agent is reachable \(p-0: not connected; p-1: not connected\)$",
    ):
        gw.router.route(list(range(40)), 4, {})
