"""The gateway's HTTP layer under 500 concurrent streams: the hand-written server it had
before (commit ff35434) against aiohttp's, side by side in one run.

Each side gets a fresh data plane of real processes (``pdd up``'s supervisor) on the
TimedEngine topology, identical but for the gateway's HTTP module: for "before" the gateway
child imports ``pdd_core/agent/gateway_api.py`` as it was at ``--before`` (read with ``git
show`` into a temporary directory and put in front of the real one by a ``sitecustomize``
finder on the child's ``PYTHONPATH``). The plane is made cheap on purpose (passes at
``--time-scale`` of the roofline, wide batches, early rejection off, pipeline P-RLD in one
site) so that the HTTP layer, not decoding, is what the two sides differ in.

Both planes run at once; ``--rounds`` rounds alternate between them (and which goes first), so
the machine's other load falls on both alike. In a round ``--concurrency`` clients (aiohttp, one
shared pool) send streaming completions until ``--requests`` were sent; a client keeps its
connection when the server allows it ("conn closed" counts answers that ended theirs). TTFT is
the time from sending a request to its first token event (the second SSE event: the first
only opens the assistant's turn, on both servers). Requests/s is the completed streams over
the summed wall time of the rounds; failures (refused connections, non-200) are counted
apart. CPU per request is read from ``/proc`` for the gateway process, the whole plane and
the load generator itself. On a shared machine compare the ratios, not the absolutes.

    .venv/bin/python bench/bench_gateway.py [--concurrency 500] [--requests 1000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

from pdd_core.agent.supervisor import DataPlane
from pdd_core.metrics import percentile

ROOT = Path(__file__).resolve().parents[1]
MODULE = "pdd_core/agent/gateway_api.py"
FINDER = '''"""Bench only: the gateway child imports the HTTP module of an older commit."""
import importlib.abc
import importlib.util
import sys

OLD = {old!r}


class OldGatewayApi(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "pdd_core.agent.gateway_api":
            return importlib.util.spec_from_file_location(name, OLD)
        return None


sys.meta_path.insert(0, OldGatewayApi())
'''


def topology(tmp: Path, time_scale: float) -> Path:
    raw = json.loads((ROOT / "fixtures/dataplane/timed.json").read_text())
    raw["engine"]["time_scale"] = time_scale
    raw["routing"]["early_rejection"] = False
    raw["allow_route_override"] = True
    raw["limits"].update(prefill_batch=64, decode_batch=512, relay_batch=512, request_timeout_s=120)
    path = tmp / "topology.json"
    path.write_text(json.dumps(raw))
    return path


def old_module_path(tmp: Path, commit: str) -> Path:
    """A directory holding ``sitecustomize.py`` that swaps in ``MODULE`` as of ``commit``."""
    source = subprocess.run(
        ["git", "show", f"{commit}:{MODULE}"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    folder = tmp / "before"
    folder.mkdir()
    old = folder / f"gateway_api_{commit}.py"
    old.write_text(source)
    (folder / "sitecustomize.py").write_text(FINDER.format(old=str(old)))
    return folder


async def one_stream(
    session: aiohttp.ClientSession, url: str, key: str, body: bytes, result: dict[str, Any]
) -> None:
    start = time.perf_counter()
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    try:
        async with session.post(url, data=body, headers=headers) as response:
            if response.status != 200:
                result["failed"] += 1
                await response.read()
                return
            if response.headers.get("Connection", "").lower() == "close":
                result["closed"] += 1
            events = 0
            async for line in response.content:
                if not line.startswith(b"data: "):
                    continue
                events += 1
                if events == 2:
                    result["ttft"].append(time.perf_counter() - start)
                if line.startswith(b"data: [DONE]"):
                    break
            result["done"] += 1
    except (aiohttp.ClientError, TimeoutError, OSError):
        result["failed"] += 1


async def load(url: str, key: str, args: argparse.Namespace) -> dict[str, Any]:
    body = json.dumps(
        {
            "prompt": "Tell me about the token factory. " * 2,
            "max_tokens": args.max_tokens,
            "stream": True,
            "pdd": {"pipeline": args.pipeline},
        }
    ).encode()
    result: dict[str, Any] = {"ttft": [], "done": 0, "failed": 0, "closed": 0}
    left = args.requests
    connector = aiohttp.TCPConnector(limit=args.concurrency)
    timeout = aiohttp.ClientTimeout(total=120)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:

        async def client() -> None:
            nonlocal left
            while left > 0:
                left -= 1
                await one_stream(session, url, key, body, result)

        start = time.perf_counter()
        await asyncio.gather(*(client() for _ in range(args.concurrency)))
        result["wall_s"] = time.perf_counter() - start
    return result


def cpu_s(pid: int) -> float:
    """User plus system CPU seconds a process has used so far (Linux ``/proc``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def start_plane(name: str, tmp: Path, env_path: Path | None, time_scale: float) -> DataPlane:
    saved = os.environ.get("PYTHONPATH")
    if env_path is not None:
        os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(env_path), saved) if p)
    try:
        plane = DataPlane(topology(tmp, time_scale), tmp / f"run-{name}")
        plane.start(timeout_s=90)
    finally:
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved
    return plane


def measure(plane: DataPlane, args: argparse.Namespace, totals: dict[str, Any]) -> None:
    """One round of load on ``plane``, added into ``totals``."""
    pids = plane.pids()
    before = {name: cpu_s(pid) for name, pid in pids.items()}
    client = cpu_s(os.getpid())
    result = asyncio.run(load(plane.gateway_url + "/v1/completions", plane.api_key, args))
    totals["client_cpu_s"] += cpu_s(os.getpid()) - client
    used = {name: cpu_s(pid) - before[name] for name, pid in pids.items()}
    totals["gateway_cpu_s"] += used["gateway"]
    totals["plane_cpu_s"] += sum(used.values())
    for key in ("done", "failed", "closed", "wall_s", "ttft"):
        totals[key] += result[key]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", type=int, default=500)
    parser.add_argument("--requests", type=int, default=1000, help="per round and side")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=16)
    parser.add_argument("--time-scale", type=float, default=0.001)
    parser.add_argument("--pipeline", default="P-RLD")
    parser.add_argument("--before", default="ff35434", help="commit of the old HTTP module")
    args = parser.parse_args()
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # children inherit it too
    planes: dict[str, DataPlane] = {}
    sides: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        try:
            old = old_module_path(tmp, args.before)
            planes[f"before ({args.before}, hand-written)"] = start_plane(
                "before", tmp, old, args.time_scale
            )
            planes["after (aiohttp.web)"] = start_plane("after", tmp, None, args.time_scale)
            warm = argparse.Namespace(**{**vars(args), "requests": 50, "concurrency": 10})
            for label, plane in planes.items():
                asyncio.run(load(plane.gateway_url + "/v1/completions", plane.api_key, warm))
                sides[label] = dict.fromkeys(
                    (
                        "done",
                        "failed",
                        "closed",
                        "wall_s",
                        "gateway_cpu_s",
                        "plane_cpu_s",
                        "client_cpu_s",
                    ),
                    0,
                )
                sides[label]["ttft"] = []
            # Rounds alternate between the sides (and which goes first) so that the machine's
            # other load falls on both alike.
            for round_ in range(args.rounds):
                order = list(planes.items())
                for label, plane in order if round_ % 2 == 0 else order[::-1]:
                    measure(plane, args, sides[label])
        finally:
            for plane in planes.values():
                plane.stop()
    print(
        f"{args.rounds} x {args.requests} streaming completions of {args.max_tokens} tokens "
        f"per side, {args.concurrency} concurrent, pipeline {args.pipeline}"
    )
    print(
        f"{'server':34} {'req/s':>8} {'TTFT p50':>9} {'TTFT p99':>9} {'done':>6} {'failed':>6} "
        f"{'conn closed':>11} {'CPU/req: gateway':>16} {'plane':>7} {'client':>7}"
    )
    rows = []
    for label, r in sides.items():
        rate = r["done"] / r["wall_s"]
        p50 = percentile(r["ttft"], 50)
        p99 = percentile(r["ttft"], 99)
        rows.append((rate, p99))
        gateway_ms, plane_ms, client_ms = (
            r[f"{k}_cpu_s"] / r["done"] * 1e3 for k in ("gateway", "plane", "client")
        )
        print(
            f"{label:34} {rate:8.1f} {p50 * 1e3:7.0f}ms {p99 * 1e3:7.0f}ms "
            f"{r['done']:6d} {r['failed']:6d} {r['closed']:11d} "
            f"{gateway_ms:14.2f}ms {plane_ms:5.2f}ms {client_ms:5.2f}ms"
        )
    (before_rate, before_p99), (after_rate, after_p99) = rows
    print(
        f"after/before: requests/s x{after_rate / before_rate:.2f}, "
        f"TTFT p99 x{after_p99 / before_p99:.2f} (goal: more requests/s, lower p99)"
    )


if __name__ == "__main__":
    main()
