"""``pdd perf``: roofline prefill and decode times of catalog models on catalog chips.

Every time the simulator and planner use comes from ``pdd_core.perf``; this verb prints a grid
of them with the binding term of each cell, so a number on a dashboard can be checked by hand
against the formulas of ``docs/physics.md``.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

DEFAULT_MODELS = ("llama-3.1-70b", "deepseek-v3", "ref-1t-mla")
DEFAULT_CHIPS = ("h100-sxm", "gpu-a", "gpu-b")
DEFAULT_PREFILL = (4096, 32768)
DEFAULT_BATCHES = (1, 32, 128)
DEFAULT_CONTEXT = 4096

# Short names of the binding term, so a row fits on a terminal.
BOUND_ABBREVIATION = {"compute": "cmp", "memory": "mem", "comm": "net"}


def register(subparsers: Any) -> None:
    """Add ``pdd perf`` to the command line."""
    parser = subparsers.add_parser(
        "perf",
        help="roofline prefill/decode times of models on chips",
        description="Prefill time (no cache hit, batch 1) and decode step time (batch b at a "
        "given context) per model and chip, each with its binding roofline term "
        "(cmp = compute, mem = HBM, net = tensor-parallel all-reduce). See docs/physics.md.",
    )
    parser.add_argument("--models", nargs="+", default=list(DEFAULT_MODELS), help="model ids")
    parser.add_argument("--chips", nargs="+", default=list(DEFAULT_CHIPS), help="chip ids")
    parser.add_argument(
        "--tp",
        type=int,
        help="tensor-parallel degree (default: the valid shape with the fewest chips whose one "
        "rank holds the largest decode batch of the table)",
    )
    parser.add_argument("--pp", type=int, default=1, help="pipeline stages (with --tp)")
    parser.add_argument("--prefill", type=int, nargs="+", default=list(DEFAULT_PREFILL))
    parser.add_argument("--batches", type=int, nargs="+", default=list(DEFAULT_BATCHES))
    parser.add_argument("--context", type=int, default=DEFAULT_CONTEXT, help="decode context")
    parser.add_argument("--json", action="store_true", help="print JSON with every term")
    parser.set_defaults(func=run)


def perf_table(
    models: list[str],
    chips: list[str],
    *,
    tp: int | None = None,
    pp: int = 1,
    prefill: tuple[int, ...] = DEFAULT_PREFILL,
    batches: tuple[int, ...] = DEFAULT_BATCHES,
    context: int = DEFAULT_CONTEXT,
) -> list[dict[str, Any]]:
    """One row per (model, chip) with the ``Timing`` of every cell, as plain data.

    The default shape (``perf.min_shape``: valid, fewest chips) is sized for the heaviest cell
    (largest batch x context, or the longest prefill), so every decode cell of the row is a batch
    one rank can actually hold. A given ``tp`` (and ``pp``) is validated like any other shape.
    """
    from pdd_core import perf
    from pdd_core.specs import InstanceShape, check_shape, load_chips, load_models

    catalog_models, catalog_chips = load_models(), load_chips()
    rows: list[dict[str, Any]] = []
    for model_id in _ids(models):
        model = _lookup(catalog_models, model_id, "model")
        for chip_id in _ids(chips):
            chip = _lookup(catalog_chips, chip_id, "chip")
            kv_needed = max(max(batches) * (context + 1), *prefill)
            if tp is None:
                row_tp = perf.min_shape(model, chip, kv_tokens=kv_needed)
            else:
                row_tp = InstanceShape(tp=tp, pp=pp)
                check_shape(model, chip, row_tp)
            capacity = perf.kv_rank_tokens(model, chip, row_tp)
            cells: dict[str, Any] = {}
            for tokens in prefill:
                timing = perf.prefill_time(model, chip, tokens, tp=row_tp)
                cells[f"prefill {_k(tokens)}"] = {**timing._asdict(), "fits": tokens <= capacity}
            for batch in batches:
                timing = perf.decode_step_time_uniform(model, chip, batch, context, tp=row_tp)
                fits = batch * (context + 1) <= capacity
                cells[f"decode b{batch}@{_k(context)}"] = {**timing._asdict(), "fits": fits}
            rows.append(
                {
                    "model": model.id,
                    "chip": chip.id,
                    "tp": row_tp.tp,
                    "shape": row_tp.to_dict(),
                    "chips": row_tp.chips,
                    "kv_capacity_tokens": capacity,
                    "cells": cells,
                }
            )
    return rows


def run(args: argparse.Namespace) -> int:
    """Print the roofline table (or its JSON with every term); exit code 0."""
    rows = perf_table(
        args.models,
        args.chips,
        tp=args.tp,
        pp=args.pp,
        prefill=tuple(args.prefill),
        batches=tuple(args.batches),
        context=args.context,
    )
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    if not rows:
        return 0
    names = list(rows[0]["cells"])
    header = f"{'model':<16}{'chip':<11}{'shape':>9}{'KV tok':>9}"
    header += "".join(f"{name:>17}" for name in names)
    print(header)
    for row in rows:
        shape = row["shape"]
        label = f"{shape['tp']}x{shape['pp']}" + (f"x{shape['dp']}" if shape["dp"] > 1 else "")
        line = f"{row['model']:<16}{row['chip']:<11}{label:>9}"
        line += f"{row['kv_capacity_tokens'] / 1e6:>8.2f}M"
        for name in names:
            cell = row["cells"][name]
            mark = "" if cell["fits"] else "*"
            text = f"{cell['seconds'] * 1000:.1f} ms {BOUND_ABBREVIATION[cell['bound']]}{mark}"
            line += f"{text:>17}"
        print(line)
    print(
        "times per pass; prefill: batch 1, no cache hit; decode: one step; bound: cmp = compute,"
        " mem = HBM, net = TP all-reduce / PP hand-off; shape: tp x pp (valid: TP inside one"
        " scale-up domain, PP across); KV tok: KV one rank holds, in millions of tokens;"
        " * = exceeds it"
    )
    return 0


def _ids(values: list[str]) -> list[str]:
    # Accept both "--models a b" and "--models a,b".
    return [part for value in values for part in value.split(",") if part]


def _lookup(catalog: dict[str, Any], key: str, kind: str) -> Any:
    if key not in catalog:
        raise ValueError(f"unknown {kind} {key!r}; known: {', '.join(sorted(catalog))}")
    return catalog[key]


def _k(tokens: int) -> str:
    # Column names use the binary K of context lengths (4K = 4096 tokens).
    if tokens >= 1024:
        return f"{tokens / 1024:.0f}K" if tokens % 1024 == 0 else f"{tokens / 1024:.1f}K"
    return str(tokens)
