"""The gateway's HTTP layer under 500 concurrent streams: the hand-written server it had
before (commit ff35434) against aiohttp's, side by side in one run.

Each side gets a fresh data plane of real processes (``pdd up``'s supervisor) on the
TinyTransformer topology of the system tests, identical but for the gateway's HTTP module: for
"before" the gateway child imports ``pdd_core/agent/gateway/api.py`` as it was at ``--before``
(read with ``git show`` into a temporary directory and put in front of the real one by a
``sitecustomize`` finder on the child's ``PYTHONPATH``). The tiny model tokenizes bytes, as the
old module did, so both sides do the same tokenizing work. The plane is made cheap on purpose
(decode steps paced at ``--step-s``, wide batches, early rejection off, pipeline P-RLD in one
site) so that the HTTP layer, not decoding, is what the two sides differ in.

Both planes run at once; ``--rounds`` rounds alternate between them (and which goes first), so
the machine's other load falls on both alike. In a round ``--concurrency`` clients (aiohttp, one
shared pool) send streaming completions until ``--requests`` were sent; a client keeps its
connection when the server allows it ("conn closed" counts answers that ended theirs). TTFT is
the time from sending a request to its first token event (the second SSE event: the first
only opens the assistant's turn, on both servers). Requests/s is the completed streams over
the summed wall time of the rounds; failures (refused connections, non-200) are counted
apart. CPU per request is read from ``/proc`` for the gateway process, the whole plane and
the load generator itself. A second table does the same with ``GET /v1/models`` (an
authenticated JSON answer and nothing else), which measures the HTTP layer alone: the streams
also wait on the data plane, which both sides share. On a shared machine compare the ratios,
not the absolutes.

    .venv/bin/python bench/bench_gateway.py [--concurrency 500] [--requests 1000] [--rounds 3]
        [--models-requests 5000]
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

from pdd_core.agent.supervisor.plane import DataPlane
from pdd_core.metrics import percentile

ROOT = Path(__file__).resolve().parents[1]
MODULE = "pdd_core/agent/gateway/api.py"
FINDER = '''"""Bench only: the gateway child imports the HTTP module of an older commit."""
import importlib.abc
import importlib.util
import sys

OLD = {old!r}


class OldGatewayApi(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "pdd_core.agent.gateway.api":
            return importlib.util.spec_from_file_location(name, OLD)
        return None


sys.meta_path.insert(0, OldGatewayApi())
'''


def topology(tmp: Path, step_s: float) -> Path:
    """The TinyTransformer plane of the system tests (byte tokens, so that both servers do the
    same tokenizing work), paced at ``step_s`` per decode step, with wide batches, early
    rejection off and route overrides on."""
    raw = json.loads((ROOT / "fixtures/dataplane/tiny.json").read_text())
    raw["engine"]["decode_step_s"] = step_s
    raw["routing"]["early_rejection"] = False
    raw["allow_route_override"] = True
    raw["limits"].update(prefill_batch=64, decode_batch=512, relay_batch=512, request_timeout_s=120)
    raw["limits"]["max_prompt_tokens"] = 4096  # the old server reads 0 (no cap) as "too long"
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


async def one_request(
    session: aiohttp.ClientSession, url: str, key: str, body: bytes | None, result: dict[str, Any]
) -> None:
    """A streaming completion (``body``), timed to its first token, or a ``GET`` of ``url``
    (``body`` None), timed to its whole answer."""
    start = time.perf_counter()
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    method = "GET" if body is None else "POST"
    try:
        async with session.request(method, url, data=body, headers=headers) as response:
            if response.status != 200:
                result["failed"] += 1
                await response.read()
                return
            if response.headers.get("Connection", "").lower() == "close":
                result["closed"] += 1
            if body is None:
                await response.read()
                result["ttft"].append(time.perf_counter() - start)
                result["done"] += 1
                return
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


async def load(
    base: str, key: str, args: argparse.Namespace, *, models: bool = False
) -> dict[str, Any]:
    """``args.requests`` requests from ``args.concurrency`` clients: streaming completions, or
    ``GET /v1/models`` (``models``: the HTTP layer alone, no data-plane work)."""
    body = json.dumps(
        {
            "prompt": "Tell me about the token factory. " * 2,
            "max_tokens": args.max_tokens,
            "stream": True,
            "pdd": {"pipeline": args.pipeline},
        }
    ).encode()
    url = base + ("/v1/models" if models else "/v1/completions")
    result: dict[str, Any] = {"ttft": [], "done": 0, "failed": 0, "closed": 0}
    left = args.requests
    connector = aiohttp.TCPConnector(limit=args.concurrency)
    timeout = aiohttp.ClientTimeout(total=120)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:

        async def client() -> None:
            nonlocal left
            while left > 0:
                left -= 1
                await one_request(session, url, key, None if models else body, result)

        start = time.perf_counter()
        await asyncio.gather(*(client() for _ in range(args.concurrency)))
        result["wall_s"] = time.perf_counter() - start
    return result


def cpu_s(pid: int) -> float:
    """User plus system CPU seconds a process has used so far (Linux ``/proc``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def start_plane(name: str, tmp: Path, env_path: Path | None, step_s: float) -> DataPlane:
    saved = os.environ.get("PYTHONPATH")
    if env_path is not None:
        os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(env_path), saved) if p)
    try:
        plane = DataPlane(topology(tmp, step_s), tmp / f"run-{name}")
        plane.start(timeout_s=90)
    finally:
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved
    return plane


FIELDS = ("done", "failed", "closed", "wall_s", "gateway_cpu_s", "plane_cpu_s", "client_cpu_s")


def measure(
    plane: DataPlane, args: argparse.Namespace, totals: dict[str, Any], *, models: bool
) -> None:
    """One round of load on ``plane``, added into ``totals``."""
    pids = plane.pids()
    before = {name: cpu_s(pid) for name, pid in pids.items()}
    client = cpu_s(os.getpid())
    result = asyncio.run(load(plane.gateway_url, plane.api_key, args, models=models))
    totals["client_cpu_s"] += cpu_s(os.getpid()) - client
    used = {name: cpu_s(pid) - before[name] for name, pid in pids.items()}
    totals["gateway_cpu_s"] += used["gateway"]
    totals["plane_cpu_s"] += sum(used.values())
    for key in (*FIELDS[:4], "ttft"):
        totals[key] += result[key]


def table(title: str, latency: str, sides: dict[str, dict[str, Any]]) -> None:
    print(title)
    print(
        f"{'server':34} {'req/s':>8} {latency + ' p50':>11} {latency + ' p99':>11} {'done':>6} "
        f"{'failed':>6} {'conn closed':>11} {'CPU/req: gateway':>16} {'plane':>7} {'client':>7}"
    )
    rows = []
    for label, r in sides.items():
        if not r["done"]:
            raise SystemExit(f"{label}: every request failed ({r['failed']}); see the run logs")
        rate = r["done"] / r["wall_s"]
        p50, p99 = percentile(r["ttft"], 50), percentile(r["ttft"], 99)
        rows.append((rate, p99))
        gateway_ms, plane_ms, client_ms = (
            r[f"{k}_cpu_s"] / r["done"] * 1e3 for k in ("gateway", "plane", "client")
        )
        print(
            f"{label:34} {rate:8.1f} {p50 * 1e3:9.1f}ms {p99 * 1e3:9.1f}ms "
            f"{r['done']:6d} {r['failed']:6d} {r['closed']:11d} "
            f"{gateway_ms:14.2f}ms {plane_ms:5.2f}ms {client_ms:5.2f}ms"
        )
    (before_rate, before_p99), (after_rate, after_p99) = rows
    print(
        f"after/before: requests/s x{after_rate / before_rate:.2f}, {latency} p99 "
        f"x{after_p99 / before_p99:.2f} (goal: more requests/s, lower p99)\n"
    )


def run(planes: dict[str, DataPlane], args: argparse.Namespace, *, models: bool) -> dict:
    """Warm each side, then ``args.rounds`` rounds that alternate between the sides (and which
    goes first), so that the machine's other load falls on both alike."""
    warm = argparse.Namespace(**{**vars(args), "requests": 50, "concurrency": 10})
    sides: dict[str, dict[str, Any]] = {}
    for label, plane in planes.items():
        asyncio.run(load(plane.gateway_url, plane.api_key, warm, models=models))
        sides[label] = {**dict.fromkeys(FIELDS, 0), "ttft": []}
    for round_ in range(args.rounds):
        order = list(planes.items())
        for label, plane in order if round_ % 2 == 0 else order[::-1]:
            measure(plane, args, sides[label], models=models)
    return sides


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", type=int, default=500)
    parser.add_argument("--requests", type=int, default=1000, help="per round and side")
    parser.add_argument("--models-requests", type=int, default=5000, help="per round and side")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=16)
    parser.add_argument("--step-s", type=float, default=0.001, help="decode step pacing")
    parser.add_argument("--pipeline", default="P-RLD")
    parser.add_argument("--before", default="ff35434", help="commit of the old HTTP module")
    args = parser.parse_args()
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # children inherit it too
    planes: dict[str, DataPlane] = {}
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        try:
            old = old_module_path(tmp, args.before)
            label = f"before ({args.before}, hand-written)"
            planes[label] = start_plane("before", tmp, old, args.step_s)
            planes["after (aiohttp.web)"] = start_plane("after", tmp, None, args.step_s)
            streams = run(planes, args, models=False)
            models_args = argparse.Namespace(**{**vars(args), "requests": args.models_requests})
            models = run(planes, models_args, models=True)
        finally:
            for plane in planes.values():
                plane.stop()
    table(
        f"{args.rounds} x {args.requests} streaming completions of {args.max_tokens} tokens "
        f"per side, {args.concurrency} concurrent, pipeline {args.pipeline}",
        "TTFT",
        streams,
    )
    table(
        f"{args.rounds} x {args.models_requests} GET /v1/models per side, {args.concurrency} "
        "concurrent (the HTTP layer alone: no data-plane work)",
        "latency",
        models,
    )


if __name__ == "__main__":
    main()
