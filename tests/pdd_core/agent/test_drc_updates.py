"""MD's DRC answer to P follows KV that lands after the query: P asks when its pass starts (to
hide the round trip), the simulator reads MD's DRC when the prefill ends, so a session's
previous turn landing in between must still spare the next turn's transfer. MD tells P with a
``KV_HAVE{update}`` (pinning the longer prefix), P skips what the latest answer said, and MD
imports exactly the blocks P skipped. No sockets: frames are handed to the agents' handlers as
their connections would, with the tiny engine's real KV."""

from __future__ import annotations

from pathlib import Path

import pytest

from pdd_core.agent.config import load_config
from pdd_core.agent.decode.main import MainDecodeAgent
from pdd_core.agent.prefill.agent import PrefillAgent
from pdd_core.agent.protocol import Frame, FrameType, KVBlockPayload, control, kv_block_frame
from pdd_core.agent.supervisor.plane import resolve
from pdd_core.engine.protocol import KVBlock, block_hashes

TINY = Path(__file__).resolve().parents[3] / "fixtures" / "dataplane" / "tiny.json"


class Wire:
    """The P end of a connection: the frames MD sent on it."""

    closed = False

    def __init__(self) -> None:
        self.frames: list[Frame] = []

    async def send(self, frame: Frame) -> int:
        self.frames.append(frame)
        return 0

    def have(self, rid: str) -> list[dict[str, object]]:
        return [
            dict(f.body) for f in self.frames if f.type is FrameType.KV_HAVE and f.request_id == rid
        ]


@pytest.fixture
def md(tmp_path: Path) -> MainDecodeAgent:
    config, _ = resolve(load_config(TINY), tmp_path)
    return MainDecodeAgent(config, "md-0")


def kv(agent: MainDecodeAgent, prompt: list[int]) -> list[KVBlock]:
    """The prompt's KV blocks as P exports them (the same engine kind as MD's)."""
    engine = agent.engine
    return engine.export_blocks(engine.prefill(prompt, None).kv)


async def query(agent: MainDecodeAgent, wire: Wire, rid: str, prompt: list[int]) -> None:
    hashes = block_hashes(prompt, agent.engine.block_size)
    await agent.handle(wire, control(FrameType.KV_QUERY, rid, {"block_hashes": hashes}))  # type: ignore[arg-type]


async def ship(
    agent: MainDecodeAgent, wire: Wire, rid: str, blocks: list[KVBlock], have: int
) -> None:
    """P's transfer: the blocks from ``have`` on, then KV_DONE."""
    for b in blocks[have:]:
        payload = KVBlockPayload(b.block_hash, b.index, b.tokens, b.data)
        await agent.handle(wire, kv_block_frame(rid, payload))  # type: ignore[arg-type]
    done = {"blocks": len(blocks), "have": have, "tokens": 0, "first_token": 0}
    await agent.handle(wire, control(FrameType.KV_DONE, rid, done))  # type: ignore[arg-type]


TURN_1 = list(range(1, 65))  # 4 blocks of 16
TURN_2 = [*TURN_1, *range(100, 140)]  # the same 4, then 2 full blocks and a partial one


async def test_kv_landing_after_the_query_is_announced_and_spared(md: MainDecodeAgent) -> None:
    first, second = Wire(), Wire()
    await query(md, first, "t1", TURN_1)
    await query(md, second, "t2", TURN_2)  # asked while turn 1's KV is still crossing

    await ship(md, first, "t1", kv(md, TURN_1), have=0)
    updates = second.have("t2")
    await ship(md, second, "t2", kv(md, TURN_2), have=4)  # P skipped what the update said

    assert updates == [{"blocks": 0}, {"blocks": 4, "update": True}]
    assert md.streams["t2"].kv is not None
    assert md.streams["t2"].kv.tokens == TURN_2  # type: ignore[attr-defined]
    assert md.streams["t2"].meta["md_have_blocks"] == 4
    assert md.drc.peek(block_hashes(TURN_2, md.engine.block_size)) == 6


async def test_p_that_started_before_the_update_sends_all_and_md_unpins_the_rest(
    md: MainDecodeAgent,
) -> None:
    first, second = Wire(), Wire()
    await query(md, first, "t1", TURN_1)
    await query(md, second, "t2", TURN_2)

    await ship(md, first, "t1", kv(md, TURN_1), have=0)
    await ship(md, second, "t2", kv(md, TURN_2), have=0)  # the update came too late for P
    md._drop(md.streams["t1"])
    md._drop(md.streams["t2"])

    assert md.drc.index.pinned_blocks() == 0  # every pin the query and update took is back


async def test_no_update_once_p_is_sending_or_for_unrelated_kv(md: MainDecodeAgent) -> None:
    first, second, other = Wire(), Wire(), Wire()
    await query(md, first, "t1", TURN_1)
    await query(md, second, "t2", TURN_2)
    await query(md, other, "x", list(range(500, 564)))
    blocks = kv(md, TURN_2)
    payload = KVBlockPayload(blocks[0].block_hash, 0, blocks[0].tokens, blocks[0].data)
    await md.handle(second, kv_block_frame("t2", payload))  # type: ignore[arg-type]

    await ship(md, first, "t1", kv(md, TURN_1), have=0)

    assert second.have("t2") == [{"blocks": 0}]
    assert other.have("x") == [{"blocks": 0}]


async def test_a_transfer_claiming_more_than_md_pinned_fails_cleanly(
    md: MainDecodeAgent,
) -> None:
    wire = Wire()
    await query(md, wire, "t2", TURN_2)

    await ship(md, wire, "t2", kv(md, TURN_2), have=4)  # MD never said it held 4

    assert "t2" not in md.streams
    assert md.drc.index.pinned_blocks() == 0


async def test_p_takes_the_largest_update_for_a_query_in_flight_only(tmp_path: Path) -> None:
    config, _ = resolve(load_config(TINY), tmp_path)
    p = PrefillAgent(config, "p-0")
    p._newer[("md-0", "r")] = 0

    for blocks in (3, 5, 4):
        await p.on_peer_frame(
            "md-0", control(FrameType.KV_HAVE, "r", {"blocks": blocks, "update": True})
        )
    await p.on_peer_frame("md-0", control(FrameType.KV_HAVE, "gone", {"blocks": 2, "update": True}))

    assert p._newer == {("md-0", "r"): 5}
