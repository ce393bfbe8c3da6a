"""The gateway's per-request intake: a prompt's text tokenized, or its token ids checked, then
hashed into blocks, timed side by side.

This is the live plane's own fixed cost before any routing (the simulator has no tokenizer).
``pdd parity`` sends token ids (``"prompt": [ids]``, which the API takes as is) so that its
live TTFT compares the serving path with the simulator's; this bench says what tokenizing
text would add. Prompts are the parity scenario's first requests, built as ``pdd replay``
builds them; each figure is the median over ``--repeat`` rounds, per prompt and per 1K tokens.

    .venv/bin/python bench/bench_intake.py [--requests 8] [--repeat 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from pdd_core.agent.gateway.openai_format import prompt_tokens
from pdd_core.agent.replay import build_prompt, build_prompt_ids
from pdd_core.engine.protocol import block_hashes
from pdd_core.engine.tokenizer import bpe
from pdd_core.scenario import load_scenario

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    scenario = load_scenario(ROOT / "fixtures/scenarios/parity.toml")
    requests = scenario.workload.requests()[: args.requests]
    tokenizer = bpe()
    texts = [json.dumps({"prompt": build_prompt(r, 512)}) for r in requests]
    ids = [json.dumps({"prompt": build_prompt_ids(r, 512)}) for r in requests]
    tokens = sum(r.input_tokens for r in requests)

    def intake(bodies: list[str]) -> float:
        began = time.perf_counter()
        for body in bodies:
            prompt = prompt_tokens(json.loads(body)["prompt"], tokenizer)
            block_hashes(prompt, scenario.config.block_size)
        return time.perf_counter() - began

    rows = []
    for name, bodies in (("text (tokenized)", texts), ("token ids (checked)", ids)):
        seconds = statistics.median(intake(bodies) for _ in range(args.repeat))
        rows.append((name, seconds / len(bodies), seconds / tokens * 1000))
    print(f"{len(requests)} prompts, mean {tokens / len(requests):.0f} tokens, "
          f"median of {args.repeat} rounds")  # fmt: skip
    print(f"{'intake':<24}{'per prompt':>14}{'per 1K tokens':>16}")
    for name, per_prompt, per_k in rows:
        print(f"{name:<24}{per_prompt * 1e3:>11.2f} ms{per_k * 1e3:>13.3f} ms")
    print(f"text / ids: {rows[0][1] / rows[1][1]:.1f}x (the baseline is the ids row)")


if __name__ == "__main__":
    main()
