"""Faults under load: what losing the relay or an MD costs the requests around it.

Starts the timed data plane (``fixtures/dataplane/timed.json``, supervised: a killed agent is
restarted as ``pdd up`` does), replays the Mooncake sample at native prompt sizes through it,
and SIGKILLs one agent partway; in the same run, the same replay with nothing killed is the
baseline. ``--burn N`` adds N busy processes beside the plane, to measure on a loaded box as
well as a quiet one (the load average is printed with each row). For each run it prints the
requests refused before any token (429 / 503, by reason), split into those sent before the
kill (in flight or queued) and after it (new requests, which another agent could serve), and
the failures after the first token (mid-stream). Goal: new requests are never refused
because an agent was lost, and under 1% of all requests fail.

    .venv/bin/python bench/bench_faults.py [--requests 120] [--speed 2] [--burn 0 8]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import multiprocessing
import os
import re
import signal
import tempfile
import threading
import time
from pathlib import Path

from pdd_core.agent.replay import Result, replay
from pdd_core.agent.supervisor.plane import DataPlane
from pdd_core.workload.readers import read_trace

ROOT = Path(__file__).resolve().parents[1]
TOPOLOGY = ROOT / "fixtures" / "dataplane" / "timed.json"
TRACE = ROOT / "fixtures" / "traces" / "mooncake_conversation_sample.jsonl"


def _burn() -> None:  # pragma: no cover - a child process
    while True:
        pass


def one_run(plane: DataPlane, args: argparse.Namespace, victim: str | None) -> dict[str, object]:
    requests = list(read_trace(TRACE).requests[: args.requests])
    results: list[Result] = []
    killed_at: list[float] = []

    def load() -> None:
        summary = asyncio.run(replay(
            requests, gateway=plane.gateway_url, api_key=plane.api_key, model="deepseek-v3",
            speed=args.speed, block_tokens=512, output_scale=1.0, max_output=0, timeout_s=300,
        ))  # fmt: skip
        results.extend(summary.results)

    thread = threading.Thread(target=load)
    thread.start()
    if victim is not None:
        time.sleep(args.kill_after)
        killed_at.append(time.time())
        os.kill(plane.pids()[victim], signal.SIGKILL)
    thread.join()
    kill = killed_at[0] if killed_at else float("inf")
    refused = [r for r in results if not r.ok and not r.mid_stream]
    # The reason in the refusal's message, its figures left out ("predicted TTFT N s over ...").
    reasons = collections.Counter(
        re.sub(r"[0-9.]+", "N", r.error.split("(", 1)[-1].split(")")[0]) for r in refused
    )
    return {
        "victim": victim or "none",
        "requests": len(results),
        "refused before": sum(1 for r in refused if r.sent_at < kill),
        "refused new": sum(1 for r in refused if r.sent_at >= kill),
        "mid-stream": sum(1 for r in results if not r.ok and r.mid_stream),
        "load": os.getloadavg()[0],
        "reasons": dict(reasons),
    }


def wait_all_up(plane: DataPlane, timeout_s: float = 60) -> None:
    import json
    import urllib.request

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(plane.gateway_url + "/health", timeout=2) as answer:
                if all(json.loads(answer.read())["agents"].values()):
                    return
        except OSError:
            pass
        time.sleep(0.2)
    raise RuntimeError("the plane did not come back")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=120)
    parser.add_argument("--speed", type=float, default=2.0)
    parser.add_argument("--kill-after", type=float, default=8.0, help="seconds into the replay")
    parser.add_argument("--burn", type=int, nargs="+", default=[0, 8], help="busy processes")
    args = parser.parse_args()
    print(f"{args.requests} Mooncake requests at speed {args.speed:g}, native sizes; "
          f"the victim SIGKILLed {args.kill_after:g} s in")  # fmt: skip
    header = (f"{'busy':>4} {'load':>5} {'killed':>7} {'requests':>8} {'refused before':>15} "
              f"{'refused new':>12} {'mid-stream':>11}  refusals by reason")  # fmt: skip
    print(header)
    for burn in args.burn:
        burners = [multiprocessing.Process(target=_burn, daemon=True) for _ in range(burn)]
        for burner in burners:
            burner.start()
        try:
            with tempfile.TemporaryDirectory() as run_dir:
                plane = DataPlane(TOPOLOGY, run_dir)
                plane.start(timeout_s=180)
                plane.supervise(lambda line: None)
                try:
                    for victim in (None, "rld-0", "md-1"):
                        wait_all_up(plane)
                        row = one_run(plane, args, victim)
                        print(f"{burn:>4} {row['load']:>5.1f} {row['victim']:>7} "
                              f"{row['requests']:>8} {row['refused before']:>15} "
                              f"{row['refused new']:>12} {row['mid-stream']:>11}  "
                              f"{row['reasons']}", flush=True)  # fmt: skip
                finally:
                    plane.stop()
        finally:
            for burner in burners:
                burner.terminate()


if __name__ == "__main__":
    main()
