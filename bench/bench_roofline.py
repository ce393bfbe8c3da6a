"""Roofline evaluations per second: how many timing questions the planner can ask per second.

The planner and the router call ``pdd_core.perf`` in inner loops (sweeps over batch sizes,
per-request TTFT estimates), so this prints evaluations per second of each public function,
side by side in one run, with the ratio of the list-based decode step to its uniform-batch
twin (the reason ``decode_step_time_uniform`` exists).

Run: ``.venv/bin/python bench/bench_roofline.py``.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pdd_core import perf  # noqa: E402
from pdd_core.specs import ChipSpec, ModelSpec, load_chips, load_models  # noqa: E402


def specs() -> tuple[ModelSpec, ChipSpec, str]:
    """DeepSeek-V3 on H800 from the shipped catalog (``fixtures/catalog``)."""
    return load_models()["deepseek-v3"], load_chips()["h800"], "catalog deepseek-v3 on h800"


def rate(call: Callable[[], object], seconds: float = 0.5) -> float:
    """Calls per second, best of three runs of at least ``seconds`` each."""
    best = 0.0
    for _ in range(3):
        count = 0
        start = time.perf_counter()
        while (elapsed := time.perf_counter() - start) < seconds:
            for _ in range(100):
                call()
            count += 100
        best = max(best, count / elapsed)
    return best


def main() -> None:
    model, chip, label = specs()
    tp = perf.min_tp(model, chip)
    contexts = [4096] * 128
    cases: list[tuple[str, Callable[[], object]]] = [
        (
            "prefill_time 4K new, 60K cached",
            lambda: perf.prefill_time(model, chip, 4096, 61440, tp),
        ),
        ("extend_time 64 tokens on 64K", lambda: perf.extend_time(model, chip, 64, 65536, tp)),
        (
            "decode_step_time (list of 128)",
            lambda: perf.decode_step_time(model, chip, contexts, tp),
        ),
        (
            "decode_step_time_uniform b=128",
            lambda: perf.decode_step_time_uniform(model, chip, 128, 4096, tp),
        ),
        ("kv_capacity_tokens", lambda: perf.kv_capacity_tokens(model, chip, tp)),
        ("min_tp", lambda: perf.min_tp(model, chip)),
    ]
    print(f"specs: {label}, tp={tp}")
    print(f"{'evaluation':<36}{'evals/s':>14}")
    rates = {}
    for name, call in cases:
        rates[name] = rate(call)
        print(f"{name:<36}{rates[name]:>14,.0f}")
    ratio = rates["decode_step_time_uniform b=128"] / rates["decode_step_time (list of 128)"]
    print(f"uniform vs list decode step: {ratio:.1f}x")


if __name__ == "__main__":
    main()
