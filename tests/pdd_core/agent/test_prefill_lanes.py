"""P's side of the WAN: a connection (lane) per KV transfer in flight, freed when MD says the
KV landed or closed when MD released the request mid-transfer; and the gateway's check at the
end of prefill, which P waits for before it tells MD the route. No sockets: frames are handed
to the agent's handlers as its connections would."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from pdd_core.agent.config import load_config
from pdd_core.agent.prefill.agent import PrefillAgent
from pdd_core.agent.prefill.transfer import PrefillJob
from pdd_core.agent.protocol import FrameType, control
from pdd_core.agent.supervisor.plane import resolve

TINY = Path(__file__).resolve().parents[3] / "fixtures" / "dataplane" / "tiny.json"


@pytest.fixture
def agent(tmp_path: Path) -> PrefillAgent:
    config, _ = resolve(load_config(TINY), tmp_path)
    return PrefillAgent(config, "p-0")


def carry(agent: PrefillAgent, rid: str) -> str:
    """Start a transfer of ``rid`` to md-0 as ``_send_missing`` does; returns its lane."""
    lane = agent._take_lane("md-0")
    agent._carrying[("md-0", rid)] = (lane, 0.0)
    return lane


async def test_each_transfer_in_flight_has_its_own_lane_until_md_says_it_landed(
    agent: PrefillAgent,
) -> None:
    lanes = [carry(agent, rid) for rid in ("a", "b", "c")]
    await agent.on_peer_frame("md-0", control(FrameType.KV_LANDED, "b"))
    after = carry(agent, "d")

    assert lanes == ["", "kv1", "kv2"]
    assert after == "kv1"  # b's lane, free again
    assert agent._lanes["md-0"] == {"", "kv1", "kv2"}


async def test_a_release_by_md_mid_transfer_resets_that_lane_only(agent: PrefillAgent) -> None:
    carry(agent, "a")
    carry(agent, "b")
    closed: list[tuple[str, bool]] = []
    for key in ("md-0", "md-0#kv1"):
        link = agent.peer("md-0", key.partition("#")[2])

        async def close(key: str = key, *, reset: bool = False) -> None:
            closed.append((key, reset))

        link.close = close  # type: ignore[method-assign]

    await agent.on_peer_frame("md-0", control(FrameType.CANCEL, "b", {"reason": "released"}))

    # The rest of b's KV leaves the line (a reset: a close would still deliver what P had
    # written, tests/pdd_core/agent/test_wan_emulator.py); a's goes on.
    assert closed == [("md-0#kv1", True)]
    assert agent._lanes["md-0"] == {""}
    assert ("md-0", "b") in agent.abandoned


async def test_losing_a_kv_lane_frees_it_but_leaves_the_drc_queries_alone(
    agent: PrefillAgent,
) -> None:
    carry(agent, "a")
    waiter: asyncio.Future[int] = asyncio.get_running_loop().create_future()
    agent._have[("md-0", "q")] = waiter

    agent.peer_down(agent.peer("md-0"))
    kv_lane_lost = (agent._lanes["md-0"], waiter.done())
    agent.peer_down(agent.peer("md-0", "control"))

    assert kv_lane_lost == (set(), False)
    assert isinstance(waiter.exception(), ConnectionError)


def job(rid: str, pipeline: str) -> PrefillJob:
    meta: dict[str, Any] = {"pipeline": pipeline, "md": "md-0", "rld": None}
    return PrefillJob(conn=None, request_id=rid, prompt=[1, 2, 3], meta=meta)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        (control(FrameType.RELAY_CHECK, "r", {"rld": "rld-0"}), ("P-RLD-MD", "rld-0")),
        (control(FrameType.RELAY_CHECK, "r", {"rld": None}), ("P-MD", None)),
        (control(FrameType.CANCEL, "r"), ("P-MD", None)),
    ],
)
async def test_a_p_md_request_takes_the_route_the_gateway_answers_at_the_end_of_prefill(
    agent: PrefillAgent, answer: Any, expected: tuple[str, str | None]
) -> None:
    pending = job("r", "P-MD")
    agent._await_check(pending)
    assert pending.rechecked is not None and not pending.rechecked.done()

    await agent.handle(None, answer)  # type: ignore[arg-type]
    meta = await pending.rechecked

    assert (meta["pipeline"], meta["rld"]) == expected
    assert agent._checks == {}


async def test_only_a_p_md_request_waits_for_the_check(agent: PrefillAgent) -> None:
    relayed = job("r", "P-RLD-MD")
    agent._await_check(relayed)

    assert relayed.rechecked is None
    assert agent._checks == {}
