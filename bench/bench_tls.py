"""What TLS costs the data plane: KV transfer throughput, per-request latency, connection setup.

Every connection between agents is mutual TLS 1.3 (``pdd_core.agent.tls``). This bench runs
the agents' own connection code (``runtime.serve_frames`` and ``runtime.PeerLink``, HELLO and
all) on loopback, once plain and once with a plane's certificates, in the same run and
process, and prints each figure side by side with the ratio:

- **KV transfer**: ``KV_BLOCK`` frames of one block each (``--block-kb``, the size of a
  256-token block at DeepSeek-V3's 70 KB/token scaled down by the timed plane's
  ``payload_scale``, and a native one) pushed through one connection: MB/s, and CPU seconds
  per GB for both ends together (encryption and decryption; ``time.process_time``);
- **per request**: a request-shaped exchange on an open connection: a ``GENERATE`` with the
  token ids of a ``--prompt``-token prompt, answered by ``--tokens`` ``TOKENS`` frames, one a
  token, as a decode agent streams them; p50 and p99 of the whole exchange, and CPU per
  request;
- **connection setup**: connect, TLS handshake (ECDSA P-256), HELLO / HELLO_ACK: p50 and CPU.

Loopback has no line in the way, so these are the CPU's figures: on a WAN the line's
bandwidth caps the transfer long before TLS does at these rates (see the MB/s column against
the plane's 25 Gbps line emulated at 0.025 Gbps). Wall-clock figures on a shared machine are
noisy: the CPU columns and the ratios are the ones to read; ``--repeat`` takes each figure's
best run.

    .venv/bin/python bench/bench_tls.py [--mb 256] [--requests 200] [--repeat 3]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from pdd_core.agent.auth import PlaneAuth
from pdd_core.agent.protocol import (
    FLAG_END_OF_STREAM,
    Frame,
    FrameType,
    KVBlockPayload,
    control,
    kv_block_frame,
)
from pdd_core.agent.runtime import Conn, PeerLink, bound_address, hello, serve_frames
from pdd_core.agent.tls import TlsContexts, issue_plane

MB = 1024 * 1024
SECRET = b"bench"


class Pair:
    """A listener (``md-0``) and a link to it (from ``p-0``), plain or TLS."""

    def __init__(self, tls_dir: Path | None) -> None:
        self.tls_dir = tls_dir
        self.received = 0
        self.done = asyncio.Event()
        self.expect = 0
        self.server: asyncio.Server | None = None
        self.link: PeerLink | None = None
        self.streamed = asyncio.Event()

    async def handler(self, conn: Conn, frame: Frame) -> None:
        if frame.type is FrameType.KV_BLOCK:
            self.received += len(frame.data)
            if self.received >= self.expect:
                self.done.set()
        elif frame.type is FrameType.GENERATE:
            count = int(frame.body["max_tokens"])
            for index in range(count):
                flags = FLAG_END_OF_STREAM if index == count - 1 else 0
                body = {"tokens": [index % 4000], "index": index}
                conn.post(control(FrameType.TOKENS, frame.request_id, body, flags=flags))
            await conn.flush()

    async def start(self) -> None:
        server_tls = TlsContexts.load(self.tls_dir, "md-0").server if self.tls_dir else None
        me = hello("main", "md-0", "bench")
        self.server = await serve_frames(
            "127.0.0.1", 0, me, self.handler, auth=PlaneAuth(SECRET), tls=server_tls
        )
        self.link = self.new_link(self.on_frame)

    def new_link(self, on_frame: Callable[[Frame], Awaitable[None]]) -> PeerLink:
        assert self.server is not None
        client = TlsContexts.load(self.tls_dir, "p-0").client if self.tls_dir else None
        return PeerLink("md-0", ("127.0.0.1", bound_address(self.server)[1]),
                        hello("prefill", "p-0", "bench"), on_frame, lambda _: None,
                        role="main", connect_timeout_s=10, auth=PlaneAuth(SECRET),
                        tls=lambda: client)  # fmt: skip

    async def on_frame(self, frame: Frame) -> None:
        if frame.type is FrameType.TOKENS and frame.end_of_stream:
            self.streamed.set()

    async def close(self) -> None:
        if self.link is not None:
            await self.link.close()
        if self.server is not None:
            self.server.close()


async def kv_transfer(pair: Pair, total_mb: int, block_bytes: int) -> tuple[float, float]:
    """(MB/s, CPU s per GB) pushing ``total_mb`` of KV blocks through the link."""
    assert pair.link is not None
    await pair.link.send(control(FrameType.PING))  # connected before the clock starts
    blocks = max(1, total_mb * MB // block_bytes)
    block = KVBlockPayload(1, 0, tuple(range(16)), bytes(block_bytes))
    frame = kv_block_frame("r" * 36, block)
    pair.received, pair.expect = 0, blocks * len(frame.data)
    pair.done.clear()
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(blocks):
        await pair.link.send(frame)
    await pair.done.wait()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    moved = pair.expect / MB
    return moved / wall, cpu / (moved / 1024)


async def per_request(pair: Pair, requests: int, prompt: int, tokens: int) -> dict[str, float]:
    """p50 / p99 seconds and CPU seconds of a request-shaped exchange on an open link."""
    assert pair.link is not None
    await pair.link.send(control(FrameType.PING))
    body = {"prompt_tokens": list(range(prompt)), "max_tokens": tokens, "pipeline": "P-MD"}
    times = []
    cpu = time.process_time()
    for n in range(requests):
        pair.streamed = asyncio.Event()
        started = time.perf_counter()
        await pair.link.send(control(FrameType.GENERATE, f"req-{n}", body))
        await pair.streamed.wait()
        times.append(time.perf_counter() - started)
    cpu = time.process_time() - cpu
    times.sort()
    return {"p50": statistics.median(times), "p99": times[int(0.99 * (len(times) - 1))],
            "cpu": cpu / requests}  # fmt: skip


async def setup(pair: Pair, connections: int) -> dict[str, float]:
    """p50 seconds and CPU seconds of opening a link (TCP, TLS, HELLO)."""

    async def ignore(frame: Frame) -> None:
        return None

    times = []
    cpu = time.process_time()
    for _ in range(connections):
        link = pair.new_link(ignore)
        started = time.perf_counter()
        await link.connection()
        times.append(time.perf_counter() - started)
        await link.close()
    cpu = time.process_time() - cpu
    return {"p50": statistics.median(times), "cpu": cpu / connections}


async def measure(tls_dir: Path | None, args: argparse.Namespace) -> dict[str, Any]:
    pair = Pair(tls_dir)
    await pair.start()
    try:
        out: dict[str, Any] = {}
        for kb in args.block_kb:
            runs = [await kv_transfer(pair, args.mb, kb * 1024) for _ in range(args.repeat)]
            out[f"kv {kb} KB"] = (max(r[0] for r in runs), min(r[1] for r in runs))
        runs_r = [await per_request(pair, args.requests, args.prompt, args.tokens)
                  for _ in range(args.repeat)]  # fmt: skip
        out["request"] = {k: min(r[k] for r in runs_r) for k in ("p50", "p99", "cpu")}
        runs_s = [await setup(pair, args.connections) for _ in range(args.repeat)]
        out["setup"] = {k: min(r[k] for r in runs_s) for k in ("p50", "cpu")}
        return out
    finally:
        await pair.close()


def table(plain: dict[str, Any], tls: dict[str, Any], args: argparse.Namespace) -> None:
    print(f"{'figure':<44}{'plain':>12}{'TLS':>12}{'TLS / plain':>13}")

    def row(name: str, a: float, b: float, unit: str, scale: float = 1.0) -> None:
        print(f"{name + ' (' + unit + ')':<44}{a * scale:>12.3f}{b * scale:>12.3f}{b / a:>12.2f}x")

    for kb in args.block_kb:
        key = f"kv {kb} KB"
        row(f"KV transfer, {kb} KB blocks", plain[key][0], tls[key][0], "MB/s")
        row(f"KV transfer CPU, {kb} KB blocks", plain[key][1], tls[key][1], "CPU s / GB")
    label = f"request ({args.prompt}-token prompt, {args.tokens} tokens)"
    for key in ("p50", "p99"):
        row(f"{label} {key}", plain["request"][key], tls["request"][key], "ms", 1e3)
    row(f"{label} CPU", plain["request"]["cpu"], tls["request"]["cpu"], "CPU ms", 1e3)
    row("connection setup p50", plain["setup"]["p50"], tls["setup"]["p50"], "ms", 1e3)
    row("connection setup CPU", plain["setup"]["cpu"], tls["setup"]["cpu"], "CPU ms", 1e3)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=int, default=256, help="MB of KV per transfer run")
    parser.add_argument("--block-kb", type=int, nargs="+", default=[18, 1024],
                        help="KV block sizes (18 KB: 256 tokens x 70 KB at 1/1000)")  # fmt: skip
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--prompt", type=int, default=8192)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--connections", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=3, help="best of this many runs")
    args = parser.parse_args()

    async def both() -> tuple[dict[str, Any], dict[str, Any]]:
        with tempfile.TemporaryDirectory() as folder:
            tls_dir = Path(folder)
            agents = [("p-0", "prefill", "127.0.0.1"), ("md-0", "main", "127.0.0.1")]
            issue_plane(tls_dir, agents, "127.0.0.1")
            plain = await measure(None, args)
            tls = await measure(tls_dir, args)
            return plain, tls

    plain, tls = asyncio.run(both())
    print(f"loopback, one process (both ends' CPU), best of {args.repeat}")
    table(plain, tls, args)


if __name__ == "__main__":
    main()
