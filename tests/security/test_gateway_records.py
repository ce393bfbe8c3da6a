"""Every record the gateway can write passes ingestion: its real request path (the OpenAI API,
routing, attempts, resumes, the record) driven through faults, checked by ingestion's parser
and bounds.

The gateway runs as in production (``GatewayApi`` on aiohttp, ``Gateway``'s routing and
``RequestRunner``); only its links to P, RLD and MD are stand-ins that answer as those agents
do, frame for frame (P's ``PREFILLED`` and ``KV_DONE`` with the byte counts of the KV frames it
would write, tokens by output index, the relay's handoff), and fail as they can: an agent
dies (its link goes down) before or after any frame, answers with an error, or falls silent;
a stream runs past the request's timeout; the client leaves mid-stream. Hypothesis draws the
prompt, ``max_tokens``, the pipeline, and a script per attempt. Every record is then checked
by the control plane's own parser (``telemetry.validation.records_parse``) and bounds
(``pdd_core.records`` with the catalog's model), and against what the client saw: its output
tokens are the tokens the client got, a failure is ``sla_met = false`` with its error, the
input is the client's prompt once a prefill of it ran, and nothing stays held.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp.test_utils import TestClient, TestServer
from django.utils import timezone
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from controlplane.telemetry.bounds import time_bounds_at
from controlplane.telemetry.validation import records_parse
from pdd_core.agent.config import config_from_dict
from pdd_core.agent.gateway.api import GatewayApi
from pdd_core.agent.gateway.server import Gateway
from pdd_core.agent.protocol import (
    FLAG_END_OF_STREAM,
    Frame,
    FrameType,
    KVBlockPayload,
    control,
    encode_frame,
    kv_block_frame,
)
from pdd_core.agent.supervisor.plane import resolve
from pdd_core.engine.protocol import block_hashes
from pdd_core.engine.timed import TimedEngine
from pdd_core.keys import hash_key
from pdd_core.records import RecordLimits, within_bounds
from pdd_core.specs import load_chips, load_models

ROOT = Path(__file__).resolve().parents[2]
KEY = "tk_abc123_secret"
MODEL = "tiny-test"  # context window 4,096 tokens in the catalog and at the gateway alike
BLOCK = 16
SCALE = 0.01
PIPELINES = ("P-MD", "P-RLD-MD", "P-RLD")
P_FATES = ("ok", "ok", "ok", "down_before_pass", "down_after_pass", "error_after_pass", "silent")
DECODE_FAULTS = ("none", "none", "down", "error", "silent", "slow")


def plane_config(run_dir: Path) -> Any:
    """timed.json's plane on the tiny catalog model, unpaced, with short timeouts (so a
    silence or a stall is a failure within milliseconds) and per-request pipelines."""
    raw = json.loads((ROOT / "fixtures" / "dataplane" / "timed.json").read_text())
    raw["model"] = MODEL
    raw["engine"].update(model=MODEL, tp=1, pp=1, time_scale=0.0, payload_scale=SCALE,
                         block_size=BLOCK)  # fmt: skip
    raw["limits"].update(idle_timeout_s=0.05, request_timeout_s=0.4, connect_timeout_s=0.1,
                         default_max_tokens=8)  # fmt: skip
    raw["sla"] = {"ttft_p90_s": 0.05, "ttft_p99_s": 0.05, "tpot_p90_s": 0.5, "tpot_p99_s": 1.0}
    raw["allow_route_override"] = True
    raw["tenants"] = [{"id": "acme", "key_sha256": [hash_key(KEY)]}]
    raw["journal"] = {"dir": str(run_dir / "journal"), "max_bytes": 10_000_000}
    config, _ = resolve(config_from_dict(raw), run_dir)
    return config


@dataclass(frozen=True)
class Script:
    """How one attempt's agents behave."""

    p_hit: float  # share of the prompt P holds
    md_have: float  # share of the prompt's full blocks MD's DRC holds
    p_fate: str
    fault: str  # what befalls the decode agent ``fault_on`` at token ``fault_at``
    fault_on: str  # "relay" or "main"
    fault_at: int
    handoff_at: int  # P-RLD-MD: tokens the relay emits before it hands off
    tokens_before_kv_done: bool  # the first tokens overtake P's KV_DONE (other connections)


SCRIPTS = st.builds(
    Script,
    p_hit=st.sampled_from([0.0, 0.25, 0.5, 0.75, 1.0]),
    md_have=st.sampled_from([0.0, 0.5, 1.0]),
    p_fate=st.sampled_from(P_FATES),
    fault=st.sampled_from(DECODE_FAULTS),
    fault_on=st.sampled_from(["relay", "main"]),
    fault_at=st.integers(0, 40),
    handoff_at=st.integers(1, 40),
    tokens_before_kv_done=st.booleans(),
)
OK = Script(0.0, 0.0, "ok", "none", "main", 0, 1, False)


class FakeLink:
    """Stands in for a ``PeerLink`` to one agent: what the gateway sends goes to the plane."""

    def __init__(self, plane: FakePlane, name: str) -> None:
        self.plane, self.name, self.up = plane, name, True

    async def send(self, frame: Frame) -> int:
        if not self.up:
            raise ConnectionError(f"connection to {self.name} is closed")
        self.plane.received(self.name, frame)
        return 0

    async def close(self, *, reset: bool = False) -> None:
        self.up = False


@dataclass
class FakePlane:
    """P, RLD and MD as the gateway sees them, each attempt following the next script."""

    gateway: Gateway
    scripts: list[Script]
    engine: TimedEngine
    silent: set[str] = field(default_factory=set)
    checks: dict[str, asyncio.Future[Any]] = field(default_factory=dict)
    # Per attempt over the client's prompt as sent: the hit P told the gateway (None: P's
    # counts never reached it).
    prefills: list[int | None] = field(default_factory=list)
    prompt: int = 0
    wan_sent: int = 0  # real bytes of every KV_DONE P sent
    tasks: list[asyncio.Task[None]] = field(default_factory=list)

    def received(self, agent: str, frame: Frame) -> None:
        if frame.type is FrameType.GENERATE and "prompt_tokens" in frame.body:
            script = self.scripts.pop(0) if self.scripts else OK
            task = asyncio.ensure_future(self.attempt(agent, frame, script))
            self.tasks.append(task)
        elif frame.type is FrameType.RELAY_CHECK and frame.request_id in self.checks:
            self.checks[frame.request_id].set_result(frame.body.get("rld"))
        elif frame.type is FrameType.PING and agent not in self.silent:
            self.answer(agent, control(FrameType.PONG, frame.request_id))

    def answer(self, agent: str, frame: Frame) -> bool:
        """``frame`` from ``agent`` as its link delivers it (none from a dead or silent one)."""
        if self.gateway.links[agent].up and agent not in self.silent:
            self.tasks.append(asyncio.ensure_future(self.gateway.on_frame(agent, frame)))
            return True
        return False

    async def tick(self) -> None:
        for _ in range(3):
            await asyncio.sleep(0)

    def down(self, agent: str) -> None:
        link = self.gateway.links[agent]
        if link.up:
            link.up = False
            self.gateway._on_down(link)  # type: ignore[arg-type]

    async def attempt(self, p: str, generate: Frame, script: Script) -> None:
        rid, body = generate.request_id, generate.body
        prompt, max_tokens = list(body["prompt_tokens"]), int(body["max_tokens"])
        pipeline, relay, main = body["pipeline"], body.get("rld"), body.get("md")
        client = len(prompt) == self.prompt  # the client's prompt as sent (no token before)
        if client:
            self.prefills.append(None)
        if script.p_fate == "silent":
            self.silent.add(p)
            return
        if script.p_fate == "down_before_pass":
            self.down(p)
            return
        hit = min(int(script.p_hit * len(prompt)) // BLOCK * BLOCK, len(prompt))
        counts = {"hit_tokens": hit, "miss_tokens": len(prompt) - hit}
        if pipeline == "P-MD" and main is not None:
            self.checks[rid] = asyncio.get_running_loop().create_future()
        if self.answer(p, control(FrameType.PREFILLED, rid, counts)) and client:
            self.prefills[-1] = hit
        await self.tick()
        if rid in self.checks:
            try:
                relay = await asyncio.wait_for(self.checks.pop(rid), 0.2) or relay
            except TimeoutError:
                return
            pipeline = "P-RLD-MD" if relay else pipeline
        if script.p_fate in ("down_after_pass", "error_after_pass"):
            if script.p_fate == "down_after_pass":
                self.down(p)
            else:
                error = {"code": "kv_transfer", "message": "lane reset"}
                self.answer(p, control(FrameType.ERROR, rid, error))
            return
        done = {**counts, **self.wan(rid, prompt, main, script.md_have)}
        if not script.tokens_before_kv_done:
            self.answer(p, control(FrameType.KV_DONE, rid, done))
        if main is not None:
            self.answer(main, control(FrameType.KV_LANDED, rid))
        await self.decode(rid, max_tokens, pipeline, relay, main, script)
        if script.tokens_before_kv_done:
            self.answer(p, control(FrameType.KV_DONE, rid, done))

    def wan(self, rid: str, prompt: list[int], main: str | None, have: float) -> dict[str, int]:
        """P's byte counts of the KV MD lacks, as P writes them: the KV block frames from MD's
        first missing block on (the KV at ``payload_scale`` of its size), then KV_DONE."""
        if main is None:
            return {"wan_bytes": 0, "wan_kv_bytes": 0}
        hashes = block_hashes(prompt, BLOCK)  # the trailing partial block too
        start = int(have * (len(prompt) // BLOCK))
        sent = kv = 0
        for index in range(start, len(hashes)):
            tokens = tuple(prompt[index * BLOCK : (index + 1) * BLOCK])
            data = bytes(self.engine.block_bytes(len(tokens)))
            payload = KVBlockPayload(hashes[index], index, tokens, data)
            sent += len(encode_frame(kv_block_frame(rid, payload)))
            kv += len(data)
        done = {"blocks": len(hashes), "have": start, "tokens": len(prompt), "first_token": 1}
        sent += len(encode_frame(control(FrameType.KV_DONE, rid, done)))
        self.wan_sent += sent - kv + round(kv / SCALE)
        return {"wan_bytes": sent, "wan_kv_bytes": kv}

    async def decode(self, rid: str, count: int, pipeline: str, relay: str | None,
                     main: str | None, script: Script) -> None:  # fmt: skip
        """Tokens 0..count-1 by output index: all from the relay (P-RLD), all from MD (P-MD),
        or the relay's first ``handoff_at`` and MD's after (P-RLD-MD); the fault at its token."""
        faulty = relay if script.fault_on == "relay" else main
        for index in range(count):
            source = relay if pipeline == "P-RLD" or (
                pipeline == "P-RLD-MD" and index < script.handoff_at) else main  # fmt: skip
            assert source is not None
            if index == script.fault_at and script.fault != "none" and faulty is not None:
                if script.fault == "down":
                    self.down(faulty)
                elif script.fault == "error":
                    error = {"code": "decode", "message": "engine error"}
                    self.answer(faulty, control(FrameType.ERROR, rid, error))
                elif script.fault == "silent":
                    self.silent.add(faulty)
                if script.fault != "slow":
                    return
            if script.fault == "slow" and index >= script.fault_at:
                await asyncio.sleep(0.03)  # under the idle timeout; the request's runs out
            if pipeline == "P-RLD-MD" and index == script.handoff_at and relay is not None:
                handoff = {"tokens": [], "index": index, "handoff_mode": "one-shot"}
                self.answer(relay, control(FrameType.TOKENS, rid, handoff))
            last = index == count - 1
            flags = FLAG_END_OF_STREAM if last else 0
            tokens = control(FrameType.TOKENS, rid, {"tokens": [7 + index % 50], "index": index},
                             flags=flags)  # fmt: skip
            self.answer(source, tokens)
            await self.tick()


@dataclass(frozen=True)
class Ask:
    """What the client sends and how it reads the answer."""

    prompt: int
    max_tokens: int
    pipeline: str
    relay_at_prefill_end: bool
    stream: bool
    leave_after: int | None  # a streaming client that closes after this many tokens
    mains_down: bool  # both MD down before the request (the route falls back or is refused)


ASKS = st.builds(
    Ask,
    prompt=st.sampled_from([1, 17, 300, 2048, 4000, 4095]),
    max_tokens=st.integers(1, 48),
    pipeline=st.sampled_from(PIPELINES),
    relay_at_prefill_end=st.booleans(),
    stream=st.booleans(),
    leave_after=st.one_of(st.none(), st.integers(0, 10)),
    mains_down=st.sampled_from([False, False, False, True]),
)


async def client_reads(client: TestClient, ask: Ask) -> tuple[int, bool, str]:
    """Send the request; (tokens the client got, whether it saw a failure, the request id)."""
    body = {"prompt": list(range(1, ask.prompt + 1)), "return_token_ids": True,
            "max_tokens": min(ask.max_tokens, 4096 - ask.prompt), "stream": ask.stream,
            "pdd": {"pipeline": ask.pipeline,
                    "relay_at_prefill_end": ask.relay_at_prefill_end}}  # fmt: skip
    headers = {"Authorization": f"Bearer {KEY}"}
    response = await client.post("/v1/completions", json=body, headers=headers)
    rid = response.headers.get("x-pdd-request-id", "")
    if not ask.stream or response.status != 200:
        answer = await response.json()
        if response.status != 200:
            return 0, True, rid
        return len(answer["choices"][0]["token_ids"]), False, rid
    got, failed = 0, True
    async for line in response.content:
        if not line.startswith(b"data: "):
            continue
        if line.strip() == b"data: [DONE]":
            break
        event = json.loads(line[6:])
        if "error" in event:
            failed = True
            break
        for choice in event["choices"]:
            got += len(choice.get("token_ids") or [])
            failed = failed and choice.get("finish_reason") is None
        if ask.leave_after is not None and got >= ask.leave_after:
            response.close()
            return got, True, rid
    return got, failed, rid


async def one_request(config: Any, ask: Ask, scripts: list[Script]) -> None:
    gateway = Gateway(config, "gateway")
    engine = TimedEngine(load_models()[MODEL], load_chips()["h800"], payload_scale=SCALE,
                         block_size=BLOCK)  # fmt: skip
    plane = FakePlane(gateway, list(scripts), engine, prompt=ask.prompt)
    gateway.links = {name: FakeLink(plane, name) for name in gateway.links}  # type: ignore[misc]
    if ask.mains_down:
        for agent in config.of_role("main"):
            plane.down(agent.id)
    api = GatewayApi(gateway)
    async with TestClient(TestServer(api.app)) as client:
        got, failed, rid = await client_reads(client, ask)
        for _ in range(200):  # the handler journals in its finally (after a client left too)
            if any(r["request_id"] == rid for r in gateway.journal.records()):
                break
            await asyncio.sleep(0.01)
    for task in plane.tasks:
        task.cancel()
    records = [r for r in gateway.journal.records() if r["request_id"] == rid]
    check(records, ask, got=got, failed=failed, plane=plane)
    assert gateway.router.admission.held == dict.fromkeys(gateway.router.admission.held, 0)
    assert not gateway.router.admission.wan and not gateway.active
    assert all(abs(s) < 1e-9 for s in gateway.router.queued_s.values())


def check(records: list[dict[str, Any]], ask: Ask, *, got: int, failed: bool,
          plane: FakePlane) -> None:  # fmt: skip
    assert len(records) == 1, records  # one record per request
    record = records[0]
    valid, errors = records_parse([record])
    assert errors == {}, (errors, record)
    parsed = valid[0][1]
    limits = RecordLimits.of(load_models()[MODEL])
    assert within_bounds(parsed, limits, time_bounds_at(timezone.now())), record
    # What the client saw.
    left = ask.leave_after is not None and ask.stream
    if left:
        assert record["output_tokens"] >= got
    else:
        assert record["output_tokens"] == got, (record, got)
    assert record["rld_tokens"] + record["md_tokens"] == record["output_tokens"]
    if failed and not left:  # a client that left may have had every token already
        assert record["sla_met"] is False and record["error"], record
    elif not failed:
        assert (record["error"], record["rejected"]) == ("", False), record
    assert record["input_tokens"] in (0, ask.prompt)
    if record["output_tokens"]:
        # The prefill the client got: the last attempt that prefilled its prompt as sent.
        assert record["input_tokens"] == ask.prompt, record
        told = plane.prefills[-1]  # the last attempt over the prompt as sent served it
        assert told is None or record["hit_tokens"] == told, (record, plane.prefills)
    attempts = record.get("attempts", [])
    assert len(attempts) != 1
    if attempts:
        assert record["wan_bytes"] == sum(a["wan_bytes"] for a in attempts)
        assert sum(a["output_tokens"] for a in attempts) >= record["output_tokens"]
    assert record["wan_bytes"] <= plane.wan_sent


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ask=ASKS, scripts=st.lists(SCRIPTS, max_size=3))
def test_every_record_the_gateway_writes_passes_ingestion_and_tells_what_the_client_got(
    ask: Ask, scripts: list[Script]
) -> None:
    with tempfile.TemporaryDirectory() as run_dir:
        asyncio.run(one_request(plane_config(Path(run_dir)), ask, scripts))
