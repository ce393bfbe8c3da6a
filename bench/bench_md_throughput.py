"""Tokens per second through one main-decode agent with zero pacing, versus the engine alone.

A real ``pdd agent --role main`` process is fed as P and the gateway would feed it (GENERATE,
KV_QUERY, KV_BLOCK, KV_DONE over loopback TCP, no WAN emulator) with ``--batch`` concurrent
P-MD requests of ``--tokens`` output tokens each, and every TOKENS frame is read back. The
same engine, in this process, decodes the same batch with ``decode_step`` alone. The ratio is
what the agent's framing, sockets and per-token streaming cost. TimedEngine runs at
``time_scale 0`` (no sleeping: pure overhead); the tiny model's numpy compute is real. The
bench connects as the plane's own gateway and P do: the plane's secret signs each HELLO and,
where the plane serves TLS, each connection is mutual TLS with their certificates (as
``pdd up`` issues them), so the agent runs as shipped.

    .venv/bin/python bench/bench_md_throughput.py [--batch 1 8 32] [--tokens 128]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pdd_core.agent.auth import SECRET_ENV, PlaneAuth, read_secret_file
from pdd_core.agent.config import DataPlaneConfig, load_config
from pdd_core.agent.engines import make_engine
from pdd_core.agent.protocol import (
    FLAG_END_OF_STREAM,
    Frame,
    FrameType,
    KVBlockPayload,
    control,
    kv_block_frame,
)
from pdd_core.agent.runtime import PeerLink, hello
from pdd_core.agent.supervisor.plane import plane_credentials, resolve
from pdd_core.agent.tls import TLS_DIR_ENV, TlsContexts, serves_tls
from pdd_core.engine.protocol import DecodeState

ROOT = Path(__file__).resolve().parents[1]


def engine_config(kind: str, run_dir: Path) -> Path:
    raw = json.loads((ROOT / "fixtures/dataplane/timed.json").read_text())
    if kind == "tiny":
        raw["engine"] = {"kind": "tiny", "model": "tiny-test", "block_size": 16}
        raw["model"] = "tiny-test"
    else:
        raw["engine"]["time_scale"] = 0.0
    raw["limits"]["decode_batch"] = 64
    config, _ = resolve(load_config_from(raw, run_dir), run_dir)
    path = run_dir / f"{kind}.json"
    path.write_text(json.dumps(config.to_dict()))
    return path


def load_config_from(raw: dict, run_dir: Path):  # type: ignore[no-untyped-def]
    path = run_dir / "raw.json"
    path.write_text(json.dumps(raw))
    return load_config(path)


def prompts(batch: int) -> list[list[int]]:
    return [[256, *(((i * 7 + j) % 26) + 97 for j in range(64))] for i in range(batch)]


def engine_alone(config_path: Path, batch: int, tokens: int) -> float:
    engine = make_engine(load_config(config_path), "main")
    states = []
    for i, prompt in enumerate(prompts(batch)):
        result = engine.prefill(prompt)
        states.append(DecodeState(str(i), result.kv, result.first_token))
    start = time.perf_counter()
    for _ in range(tokens - 1):
        engine.decode_step(states)
    return batch * (tokens - 1) / (time.perf_counter() - start)


def plane_secrets(config: DataPlaneConfig, run_dir: Path) -> dict[str, str]:
    """The plane's secret and TLS material, as ``pdd up`` makes them; the child's environment."""
    run_dir.mkdir(parents=True, exist_ok=True)
    secret, tls_dir = plane_credentials(config, run_dir)
    return {SECRET_ENV: str(secret), TLS_DIR_ENV: str(tls_dir)}


class Link:
    """A connection to ``md`` as the plane's agent ``me`` (its role's HELLO, signed; mutual
    TLS where the plane serves it), with the frames it answers in a queue."""

    def __init__(self, config: DataPlaneConfig, env: dict[str, str], me: str, md: str) -> None:
        self.frames: asyncio.Queue[Frame] = asyncio.Queue()
        spec, target = config.agent(me), config.agent(md)
        contexts = TlsContexts.load(env[TLS_DIR_ENV], me)

        async def on_frame(frame: Frame) -> None:
            self.frames.put_nowait(frame)

        self.peer = PeerLink(
            md, (target.host, target.port), hello(spec.role, me, config.model), on_frame,
            lambda _: None, role=target.role, connect_timeout_s=10.0,
            auth=PlaneAuth(read_secret_file(env[SECRET_ENV])),
            tls=lambda: contexts.client if serves_tls(config, md) else None,
        )  # fmt: skip

    async def next(self, *kinds: FrameType, rid: str | None = None) -> Frame:
        """The next frame of one of ``kinds`` (of request ``rid`` when given); others skipped."""
        while True:
            frame = await asyncio.wait_for(self.frames.get(), 60)
            if frame.type in kinds and rid in (None, frame.request_id):
                return frame


async def through_agent(config_path: Path, env: dict[str, str], batch: int, tokens: int) -> float:
    config = load_config(config_path)
    engine = make_engine(config, "prefill")
    gateway = Link(config, env, config.of_role("gateway")[0].id, "md-0")
    prefill = Link(config, env, config.of_role("prefill")[0].id, "md-0")
    await gateway.peer.connection()
    await prefill.peer.connection()
    work = []
    for i, prompt in enumerate(prompts(batch)):
        result = engine.prefill(prompt)
        work.append((f"r{time.time_ns()}-{i}", engine.export_blocks(result.kv), result.first_token))
    start = time.perf_counter()
    for rid, _, _ in work:
        body = {"max_tokens": tokens, "pipeline": "P-MD", "tenant": "bench"}
        await gateway.peer.send(control(FrameType.GENERATE, rid, body))
    for rid, blocks, first in work:
        full = [b.block_hash for b in blocks if len(b.tokens) == engine.block_size]
        await prefill.peer.send(control(FrameType.KV_QUERY, rid, {"block_hashes": full}))
        have = (await prefill.next(FrameType.KV_HAVE, rid=rid)).body["blocks"]  # type: ignore[index]
        for b in blocks[have:]:
            payload = KVBlockPayload(b.block_hash, b.index, b.tokens, b.data)
            await prefill.peer.send(kv_block_frame(rid, payload))
        done = {"blocks": len(blocks), "have": have, "first_token": first}
        await prefill.peer.send(control(FrameType.KV_DONE, rid, done))
    received, finished = 0, 0
    while finished < batch:
        frame = await gateway.next(FrameType.TOKENS, FrameType.ERROR)
        if frame.type is FrameType.ERROR:
            raise RuntimeError(f"the agent answered {frame.body}")
        received += len(frame.body["tokens"])  # type: ignore[index]
        finished += bool(frame.flags & FLAG_END_OF_STREAM)
    elapsed = time.perf_counter() - start
    await gateway.peer.close()
    await prefill.peer.close()
    return received / elapsed


def main(args: argparse.Namespace) -> None:
    run_dir = Path(tempfile.mkdtemp(prefix="bench-md-"))
    print(f"{'engine':<8}{'batch':>6}{'tokens':>8}{'engine alone tok/s':>20}"
          f"{'through MD agent tok/s':>24}{'ratio':>8}")  # fmt: skip
    for kind in args.engines:
        path = engine_config(kind, run_dir)
        env = plane_secrets(load_config(path), run_dir / kind)
        child = subprocess.Popen(
            [sys.executable, "-m", "pdd_core", "agent", "--role", "main", "--id", "md-0",
             "--config", str(path)],
            stdout=subprocess.PIPE, text=True, env={**os.environ, **env},
        )  # fmt: skip
        try:
            assert child.stdout is not None
            ready = child.stdout.readline()  # "ready main md-0 host:port"
            if not ready.startswith("ready"):
                raise SystemExit(f"md-0 did not start (exit {child.wait(timeout=10)})")
            for batch in args.batch:
                alone = max(engine_alone(path, batch, args.tokens) for _ in range(3))
                agent = max(
                    asyncio.run(through_agent(path, env, batch, args.tokens)) for _ in range(3)
                )
                print(f"{kind:<8}{batch:>6}{args.tokens:>8}{alone:>20.0f}{agent:>24.0f}"
                      f"{agent / alone:>8.2f}")  # fmt: skip
        finally:
            child.terminate()
            child.wait(timeout=10)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batch", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--engines", nargs="+", default=["timed", "tiny"])
    main(parser.parse_args())
