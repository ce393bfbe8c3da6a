"""The data plane's own cost: CPU per request and per output token of each agent (gateway, P,
RLD, MD), and the share of one core an agent would need in front of one real engine.

A ``pdd up`` plane of real processes on the TimedEngine topology (``fixtures/dataplane/
timed.json``: passes paced by the roofline, so the agents' CPU is their own work: framing,
sockets, routing, journaling, streaming, plus the timed engine's bookkeeping, which makes
every figure an upper bound of the agent's cost) serves a ``pdd replay`` of the Mooncake
sample at native prompt sizes. Each process's CPU time is read from ``/proc`` over an idle
period of the same length first (heartbeats, probes) and then over the replay; the table
shows the replay's CPU gross and net of the idle rate, per request and per token each agent
handled (the gateway: every output token it streamed; RLD and MD: the tokens they decoded,
from the gateway's journal; P: per request it prefilled). The replay runs a few sequences per
decode step, so an agent's per-step work is spread over fewer tokens than at batch 128: the
per-token figures are upper bounds there too.

The last column scales that cost to one real instance: the token rate of an H200 decode
instance serving Llama-3.1-70B at batch ``--batch`` (TP ``--tp``, contexts of ``--context``
tokens, its step time from ``pdd_core.perf``, DOMAIN.md section 5) for the gateway, RLD and
MD, and the prefill request rate of one such instance at the replay's mean uncached prompt for
P. Issue #29's goal: no agent needs more than a tenth of a core at that rate.

    .venv/bin/python bench/bench_agent_cost.py [--requests 60] [--speed 2] [--max-output 256]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from proc_stat import cpu_seconds

from pdd_core import perf
from pdd_core.specs import load_chips, load_models
from tests.live_server import up_banner

ROOT = Path(__file__).resolve().parents[1]
TOPOLOGY = ROOT / "fixtures/dataplane/timed.json"
TRACE = ROOT / "fixtures/traces/mooncake_conversation_sample.jsonl"
GOAL_CORE_SHARE = 0.1
ROLE_OF = {"gateway": "gateway", "p": "prefill", "rld": "relay", "md": "main"}


def role_of(agent_id: str) -> str:
    """The topology's agent ids are ``gateway``, ``p-0``, ``rld-0``, ``md-1``, ``wan``..."""
    return ROLE_OF.get(agent_id.split("-", maxsplit=1)[0], agent_id)


def cpu_by_role(pids: dict[str, int]) -> dict[str, float]:
    by_role: dict[str, float] = {}
    for agent, pid in pids.items():
        role = role_of(agent)
        by_role[role] = by_role.get(role, 0.0) + cpu_seconds([pid])
    return by_role


def journal_totals(run_dir: Path) -> dict[str, float]:
    """Requests, output tokens, RLD/MD tokens and uncached prompt tokens the gateway served."""
    totals = {"requests": 0.0, "output": 0.0, "rld": 0.0, "md": 0.0, "miss": 0.0, "prefills": 0.0}
    for path in (run_dir / "journal").glob("gateway*.jsonl"):
        for line in path.read_text().splitlines():
            record = json.loads(line)
            if record.get("rejected") or record.get("error"):
                continue
            totals["requests"] += 1
            totals["output"] += record["output_tokens"]
            totals["rld"] += record["rld_tokens"]
            totals["md"] += record["md_tokens"]
            totals["miss"] += record["miss_tokens"]
            totals["prefills"] += 1 if record["miss_tokens"] else 0
    return totals


def real_rates(batch: int, tp: int, context: int, mean_miss: float) -> dict[str, float]:
    """Tokens/s of one H200 Llama-3.1-70B decode instance, and prefills/s of one P instance."""
    model, chip = load_models()["llama-3.1-70b"], load_chips()["h200"]
    step = perf.decode_step_time_uniform(model, chip, batch, context, tp).seconds
    prefill = perf.prefill_time(model, chip, max(1, round(mean_miss)), 0, tp).seconds
    tokens_per_s = batch / step
    return {"gateway": tokens_per_s, "relay": tokens_per_s, "main": tokens_per_s,
            "prefill": 1.0 / prefill, "step_s": step, "prefill_s": prefill}  # fmt: skip


@dataclass(frozen=True)
class Measured:
    """One replay against a plane: its output, its wall time, the journal's totals, and each
    role's CPU seconds before and after it and over an idle span as long after it."""

    replay: subprocess.CompletedProcess[str]
    wall_s: float
    totals: dict[str, float]
    before: dict[str, float]
    after: dict[str, float]
    idle_start: dict[str, float]
    idle_end: dict[str, float]


def measure(args: argparse.Namespace) -> Measured:
    """Start a ``pdd up`` plane, replay the sample against it and read every agent's CPU."""
    with tempfile.TemporaryDirectory(prefix="pdd-agent-cost-") as tmp:
        run_dir = Path(tmp) / "run"
        up = subprocess.Popen(
            [sys.executable, "-m", "pdd_core", "up", str(TOPOLOGY), "--run-dir", str(run_dir)],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT,
        )  # fmt: skip
        try:
            seen = up_banner(up, timeout_s=120)
            if "pids" not in seen:
                raise SystemExit(f"pdd up did not start: {seen}")
            pids = {k: int(v) for k, v in (p.split("=") for p in seen["pids"].split())}
            time.sleep(5)  # let every agent finish starting (imports, first heartbeats)
            replay_cmd = [
                sys.executable, "-m", "pdd_core", "replay", str(TRACE), "--gateway",
                seen["gateway"], "--speed", f"{args.speed:g}", "--limit", str(args.requests),
                "--max-output", str(args.max_output),
            ]  # fmt: skip
            env = {**os.environ, "PDD_API_KEY": seen["api key"]}
            started = time.monotonic()
            before = cpu_by_role(pids)
            done = subprocess.run(replay_cmd, capture_output=True, text=True, cwd=ROOT, env=env,
                                  check=False)  # fmt: skip
            wall = time.monotonic() - started
            after = cpu_by_role(pids)
            time.sleep(3)  # the journal's last lines
            idle_start = cpu_by_role(pids)
            time.sleep(wall)
            idle_end = cpu_by_role(pids)
            totals = journal_totals(run_dir)
        finally:
            up.send_signal(signal.SIGTERM)
            up.wait(timeout=30)
    return Measured(done, wall, totals, before, after, idle_start, idle_end)


def print_table(measured: Measured, rates: dict[str, float]) -> None:
    """Each agent's CPU over the replay, net of its idle rate, per unit it handled, and the
    share of a core it would need at the real instance's rate."""
    totals, before, after = measured.totals, measured.before, measured.after
    print(
        "| agent | CPU s (replay) | idle CPU s (same wall) | net CPU s | units handled "
        "| net CPU per unit | core share at the real rate | goal |"
    )
    print("|" + "---|" * 8)
    handled = {
        "gateway": (totals["output"], "output tokens"),
        "prefill": (totals["prefills"], "prefills"),
        "relay": (totals["rld"], "output tokens"),
        "main": (totals["md"], "output tokens"),
    }
    net_total = 0.0
    for role, (units, unit) in handled.items():
        gross = after.get(role, 0.0) - before.get(role, 0.0)
        idle = measured.idle_end.get(role, 0.0) - measured.idle_start.get(role, 0.0)
        net = max(gross - idle, 0.0)
        net_total += net
        per_unit = net / units if units else float("nan")
        share = per_unit * rates[role]
        per_unit_text = (
            f"{per_unit * 1e3:.1f} ms" if role == "prefill" else f"{per_unit * 1e6:.0f} us"
        )
        verdict = "met" if share <= GOAL_CORE_SHARE else "NOT met"
        print(
            f"| {role} | {gross:.2f} | {idle:.2f} | {net:.2f} | {int(units)} {unit} "
            f"| {per_unit_text} | {share:.3f} | <= {GOAL_CORE_SHARE} ({verdict}) |"
        )
    print()
    print(
        f"all agents, net: {net_total / max(totals['requests'], 1) * 1e3:.1f} ms of CPU per request"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=60)
    parser.add_argument("--speed", type=float, default=2.0)
    parser.add_argument("--max-output", type=int, default=256)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--tp", type=int, default=8)
    parser.add_argument("--context", type=int, default=4096)
    args = parser.parse_args()

    measured = measure(args)
    done, totals = measured.replay, measured.totals
    if done.returncode != 0:
        raise SystemExit(done.stdout + done.stderr)
    n = totals["requests"]
    mean_miss = totals["miss"] / max(totals["prefills"], 1.0)
    rates = real_rates(args.batch, args.tp, args.context, mean_miss)
    print(done.stdout.strip().splitlines()[-1] if done.stdout.strip() else "")
    print(
        f"replay: {int(n)} requests served, {int(totals['output'])} output tokens "
        f"(RLD {int(totals['rld'])}, MD {int(totals['md'])}), mean uncached prompt "
        f"{mean_miss:,.0f} tokens, {measured.wall_s:.1f} s wall; "
        f"load average {os.getloadavg()[0]:.1f}"
    )
    print(
        f"real instance: H200 Llama-3.1-70B TP{args.tp}, decode batch {args.batch} at "
        f"{args.context} tokens: step {rates['step_s'] * 1e3:.1f} ms = "
        f"{rates['main']:,.0f} tokens/s; prefill of {mean_miss:,.0f} tokens "
        f"{rates['prefill_s']:.3f} s = {rates['prefill']:.2f} prefills/s"
    )
    print()
    print_table(measured, rates)


if __name__ == "__main__":
    main()
