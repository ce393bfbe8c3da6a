"""Running a request in the gateway, frame by frame: the check of a P-MD route at the end of
its prefill, the WAN flow's window and the WAN bytes reported (the agents' links are stand-ins
that record what the gateway sends; the agents' answers are put on the request's queue)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from pdd_core.agent.gateway.openai_format import Completion
from pdd_core.agent.gateway.server import Gateway
from pdd_core.agent.gateway.types import Outcome, Route
from pdd_core.agent.protocol import FLAG_END_OF_STREAM, Frame, FrameType, control
from pdd_core.engine.protocol import block_hashes
from pdd_core.routing import Pipeline
from pdd_core.specs import SLA
from tests.pdd_core.agent.test_gateway_routing import cache_event, make_gateway

Sent = list[tuple[str, Frame]]
Queue = asyncio.Queue[tuple[str, Frame | None]]
Agents = Callable[[Queue, Sent, Route], Awaitable[None]]


class Recorder:
    """Stands in for a ``PeerLink``: records the frames the gateway sends an agent."""

    def __init__(self, sent: Sent, name: str) -> None:
        self.sent, self.name, self.up = sent, name, True

    async def send(self, frame: Frame) -> int:
        self.sent.append((self.name, frame))
        return 0


@pytest.fixture
def gateway(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Gateway:
    gw = make_gateway(monkeypatch, tmp_path)
    gw.config = replace(gw.config, engine=replace(gw.config.engine, payload_scale=0.001))
    return gw


PROMPT = list(range(320))


async def run(
    gateway: Gateway, agents: Agents, override: dict[str, Any] | None = None
) -> tuple[Route, Outcome, Sent]:
    """Route ``PROMPT`` (md-0 holds all but its last block: P-MD) and run it to its end with
    ``agents`` playing P, RLD and MD."""
    sent: Sent = []
    gateway.links = {name: Recorder(sent, name) for name in gateway.links}  # type: ignore[misc]
    await cache_event(gateway, "md-0", block_hashes(PROMPT[:304], 16))
    prompt, override = PROMPT, override or {}
    route = gateway.router.route(prompt, 2, override)
    assert (route.pipeline, route.main) == (Pipeline.P_MD, "md-0")
    outcomes: list[Outcome] = []

    async def client() -> None:
        async for _, outcome in gateway.generate(route, prompt, 2, "t", override, request_id="r"):
            outcomes.append(outcome)

    task = asyncio.create_task(client())
    while "r" not in gateway.active:
        await asyncio.sleep(0)
    await agents(gateway.active["r"], sent, route)
    await task
    return route, outcomes[-1], sent


async def settle() -> None:
    """Let the gateway take what is on the queue (and the client what it yields)."""
    for _ in range(50):
        await asyncio.sleep(0)


def tokens(index: int, values: list[int], *, last: bool) -> Frame:
    flags = FLAG_END_OF_STREAM if last else 0
    return control(FrameType.TOKENS, "r", {"tokens": values, "index": index}, flags=flags)


async def test_a_crowded_line_at_the_end_of_prefill_relays_a_p_md_request(
    gateway: Gateway,
) -> None:
    flows: list[int] = []

    async def agents(queue: Queue, sent: Sent, route: Route) -> None:
        # Given: 9 transfers on the line and a first-token target the direct path now misses.
        for _ in range(9):
            gateway.router.flow_starts(
                gateway.router.route(list(range(1, 30)), 2, {"pipeline": "P-MD"}), 29
            )
        gateway.config = replace(gateway.config, sla=SLA(ttft_p90_s=0.01, ttft_p99_s=10.0))
        # When: P reports the end of its prefill.
        queue.put_nowait((route.prefill, control(FrameType.PREFILLED, "r")))
        await settle()
        flows.append(gateway.router._wan_state().flows)
        done = {"wan_bytes": 163_840, "wan_kv_bytes": 160_000}
        queue.put_nowait((route.prefill, control(FrameType.KV_DONE, "r", done)))
        queue.put_nowait(("rld-0", tokens(0, [7], last=False)))
        queue.put_nowait((str(route.main), control(FrameType.KV_LANDED, "r")))
        await settle()
        flows.append(gateway.router._wan_state().flows)
        queue.put_nowait((str(route.main), tokens(1, [8], last=True)))

    route, outcome, sent = await run(gateway, agents)

    # Then: the relay is registered as P-RLD-MD, P is told to ship to it, and the request is
    # reported (usage, journal) as the pipeline that served it, with its WAN bytes real.
    relay_generate = [f for name, f in sent if name == "rld-0" and f.type is FrameType.GENERATE]
    checks = [f.body for name, f in sent if f.type is FrameType.RELAY_CHECK]
    assert [f.body["pipeline"] for f in relay_generate] == ["P-RLD-MD"]
    assert relay_generate[0].body["md"] == route.main
    assert checks == [{"rld": "rld-0"}]
    assert (outcome.route.pipeline, outcome.route.relay) == (Pipeline.P_RLD_MD, "rld-0")
    assert (outcome.tokens, outcome.pdd.rld_tokens, outcome.pdd.md_tokens) == ([7, 8], 1, 1)
    assert flows == [10, 9]  # its own flow from PREFILLED until MD said the KV landed
    usage = Completion(False, "m", len(PROMPT), False).usage(outcome, route)["pdd"]
    assert (usage["pipeline"], usage["wan_bytes"]) == ("P-RLD-MD", 160_000_000 + 3_840)


async def test_a_quiet_line_keeps_p_md_and_p_hears_so(gateway: Gateway) -> None:
    async def agents(queue: Queue, sent: Sent, route: Route) -> None:
        queue.put_nowait((route.prefill, control(FrameType.PREFILLED, "r")))
        done = {"wan_bytes": 2_000, "wan_kv_bytes": 1_500}
        queue.put_nowait((route.prefill, control(FrameType.KV_DONE, "r", done)))
        queue.put_nowait((str(route.main), control(FrameType.KV_LANDED, "r")))
        queue.put_nowait((str(route.main), tokens(0, [7, 8], last=True)))

    route, outcome, sent = await run(gateway, agents)

    assert [f.body for _, f in sent if f.type is FrameType.RELAY_CHECK] == [{"rld": None}]
    assert not [f for name, f in sent if name == "rld-0"]
    assert outcome.route == route
    assert outcome.pdd.wan_bytes == 1_500_000 + 500  # the KV scaled back, the framing as it was
    assert gateway.router._wan_state().flows == 0
    assert gateway.router.admission.held == dict.fromkeys(gateway.router.admission.held, 0)


@pytest.mark.parametrize(
    ("override", "relayed"),
    [({"pipeline": "P-MD"}, False), ({"pipeline": "P-MD", "relay_at_prefill_end": True}, True)],
)
async def test_a_forced_pipeline_is_not_checked_again_unless_the_check_is_forced_too(
    gateway: Gateway, override: dict[str, Any], relayed: bool
) -> None:
    async def agents(queue: Queue, sent: Sent, route: Route) -> None:
        for _ in range(9):  # a line the check would relay on, were it asked
            gateway.router.flow_starts(
                gateway.router.route(list(range(1, 30)), 2, {"pipeline": "P-MD"}), 29
            )
        gateway.config = replace(gateway.config, sla=SLA(ttft_p90_s=0.01, ttft_p99_s=10.0))
        queue.put_nowait((route.prefill, control(FrameType.PREFILLED, "r")))
        queue.put_nowait((str(route.main), tokens(0, [7, 8], last=True)))
        queue.put_nowait((route.prefill, control(FrameType.KV_DONE, "r", {})))

    _, outcome, sent = await run(gateway, agents, override)

    checks = [f.body for _, f in sent if f.type is FrameType.RELAY_CHECK]
    assert checks == [{"rld": "rld-0" if relayed else None}]
    assert outcome.route.pipeline is (Pipeline.P_RLD_MD if relayed else Pipeline.P_MD)
