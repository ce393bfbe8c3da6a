"""``pdd catalog chips|models``: the catalogs both halves of the product read."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict
from typing import Any

from pdd_core.specs import load_chips, load_models


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("catalog", help="list the chip or model catalog")
    parser.add_argument("kind", choices=("chips", "models"))
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.kind == "chips":
        chips = load_chips()
        if args.json:
            print(json.dumps({k: asdict(v) for k, v in chips.items()}, indent=2))
            return 0
        print(f"{'id':<14} {'BF16 TF/s':>9} {'HBM GiB':>8} {'HBM TB/s':>8} {'$/h':>6}  name")
        for c in chips.values():
            print(
                f"{c.id:<14} {c.bf16_tflops:>9.0f} {c.hbm_gib:>8.0f} {c.hbm_tbps:>8.2f} "
                f"{c.price_per_hour:>6.2f}  {c.name}"
            )
        return 0
    models = load_models()
    if args.json:
        out = {
            k: {
                **asdict(v),
                "attention": v.attention.value,
                "kv_bytes_per_token": v.kv_bytes_per_token,
            }
            for k, v in models.items()
        }
        print(json.dumps(out, indent=2))
        return 0
    print(f"{'id':<18} {'total B':>8} {'active B':>8} {'attn':>4} {'KV KB/tok':>9}  name")
    for m in models.values():
        print(
            f"{m.id:<18} {m.total_params_b:>8.1f} {m.active_params_b:>8.1f} "
            f"{m.attention.value:>4} {m.kv_bytes_per_token / 1000:>9.1f}  {m.name}"
        )
    return 0
