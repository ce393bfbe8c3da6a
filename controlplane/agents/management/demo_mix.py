"""The demo's second load: fresh long prompts that take PDD's other pipelines and handoff modes.

The Mooncake replay, scaled down to fit a 2-core machine (``run_demo.DEMO_REPLAY_ARGS``), sends
prompts of about 900 tokens, whose KV crosses the WAN well within the routing table's 1 s
transfer budget: over 99 % of it goes P-MD. Beside it, ``make demo`` replays these requests at
native size (``--block-tokens 512``), each with fresh blocks (a new trace file per cycle, so no
prefix repeats), a cycle of three every ``MIX_PERIOD_S`` seconds (about 0.2 req/s beside the
Mooncake sample's 2.8); with the demo plane's default routing
table (``pdd_core.routing.RoutingTable``) and DeepSeek-V3's 70,272 KV bytes per token on the
25 Gbps line:

- 40,000 input and 64 output tokens: singular (input >= 32,768, output < 500, no hit), P-RLD;
- 50,000 input, 600 output: 3.5 GB of KV, about 1.1 s on an idle line, over the budget:
  P-RLD-MD; RLD starts decoding at once;
- 80,000 input, 600 output: 5.6 GB, about 1.8 s: P-RLD-MD.

What happens at the handoff is measured, not chosen: the timed RLD decodes a token in about
3.4 ms, so by the time the KV lands (the P-MD traffic shares the line) it has decoded hundreds of
tokens, more than ``extend_decode_min_tokens`` (64): the handoff is extend-decode, or RLD has
finished the 50,000-token request's 600 tokens before MD is ready (no handoff), unless RLD's load
is at or above ``rld_load_threshold``, when it is one-shot (freeing RLD). With the default
threshold (70 % of RLD's 64-sequence batch) that needs 45 streams on RLD at once, which a 2-core
machine never carries. So the demo's plane runs a demo routing table (``DEMO_ROUTING``, a demo
setting, not a tuned figure): ``rld_load_threshold`` = 2/64, "RLD holds another stream", and the
50,000- and 80,000-token requests of a cycle arrive together, prefilled side by side on the
plane's two P instances: the first to hand over finds the other on RLD (one-shot), the second
finds RLD alone (extend-decode, or finished on RLD). README states what a run showed. The
prompts' prefill (1-2 s at the plane's half speed, ``pdd perf``) keeps their TTFT well inside the
demo's 5 s P90 target. This is a demo setting, not a workload model.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

MIX_PERIOD_S = 12.0
# (input tokens, output tokens, seconds after the cycle starts)
MIX_REQUESTS = ((40_000, 64, 0.0), (50_000, 600, 4.0), (80_000, 600, 4.0))
# The demo plane's routing beside the default table (module docstring): one-shot when RLD holds
# two of its 64 sequences.
DEMO_ROUTING = {"rld_load_threshold": 2 / 64}
MIX_REPLAY_ARGS = ["--block-tokens", "512", "--timeout", "120"]
TRACE_BLOCK = 512
# Hash ids far above any Mooncake trace's, and a fresh range per cycle.
_HASH_BASE = 1 << 40
_CYCLE_STRIDE = 1 << 20


def mix_trace(path: Path, cycle: int) -> Path:
    """Write cycle ``cycle``'s trace (Mooncake JSONL) with blocks no earlier cycle used."""
    rows = []
    for index, (inputs, outputs, at_s) in enumerate(MIX_REQUESTS):
        first = _HASH_BASE + cycle * _CYCLE_STRIDE + index * (_CYCLE_STRIDE // 4)
        blocks = list(range(first, first + -(-inputs // TRACE_BLOCK)))
        rows.append({"timestamp": int(at_s * 1000), "input_length": inputs,
                     "output_length": outputs, "hash_ids": blocks})  # fmt: skip
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def mix_loop(
    spawn: Callable[[list[str], Path], Any],
    replay_command: Callable[[Path], list[str]],
    run_dir: Path,
    stop: threading.Event,
) -> None:
    """Replay a fresh cycle every ``MIX_PERIOD_S`` until ``stop`` (``spawn`` starts and keeps
    the child, so the demo stops it with the rest)."""
    cycle = 0
    log = run_dir / "replay-mix.log"
    while not stop.is_set():
        trace = mix_trace(run_dir / "mix-trace.jsonl", cycle)
        child = spawn([*replay_command(trace), *MIX_REPLAY_ARGS], log)
        elapsed = 0.0
        while child.poll() is None and not stop.wait(0.5):
            elapsed += 0.5
        cycle += 1
        stop.wait(max(1.0, MIX_PERIOD_S - elapsed))
