"""GPU check: measured prefill, decode, KV size, KV host copy and extend beside the roofline.

For a machine with one NVIDIA GPU, no network, and only PyTorch and ``transformers`` installed.
It builds random-weight models from real architecture configs (``ARCHITECTURES`` below, copied
from the published ``config.json`` files; random weights cost exactly what trained ones do), then
times on the GPU, in bf16:

- prefill of one sequence at 1K / 4K / 16K / 32K tokens;
- one decode step at batch 1 / 8 / 32 / 128 with a 4K-token context per sequence;
- KV bytes per token (measured from the cache tensors the model filled);
- KV export of one 4K-token sequence to pinned host memory and its import back (ms per MB);
- the extend (recompute) of 100 handed-over tokens on top of a 4K and a 32K context.

Each figure is printed beside ``pdd_core.perf``'s roofline for the detected chip (the same
functions ``pdd perf`` prints) with the ratio measured / model, and everything goes to a JSON
file. KV copies have no roofline of their own: they are set beside the time the chip's
scale-out NIC (the rate the transfer model ships KV at) takes per MiB, so a ratio below 1 means
staging KV through host memory is faster than the NIC and does not bound a transfer. Cells
that do not fit in free GPU memory, or would overrun the time budget (8 minutes in all), are
reported as skipped with the reason, never silently dropped.

``--dry-run`` runs the same code on the CPU with a tiny config and small sizes, so CI checks the
script without a GPU (its ratios mean nothing).

Run on the GPU machine: ``python bench/gpu_check.py --out gpu_check.json``.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gpu_check_torch import Bench  # noqa: E402  (bench/ is on sys.path: the script's folder)

from pdd_core import perf  # noqa: E402
from pdd_core.specs import Attention, ChipSpec, ModelSpec, load_chips  # noqa: E402

MIB = 1024 * 1024
GIB = 1024 * MIB

# Published configs (huggingface.co/meta-llama/Llama-3.1-8B and -70B, config.json). The 70B
# class keeps every width and cuts the depth to 16 of 80 layers so weights plus a batch-128 KV
# fit one 80 GB chip; the roofline is computed for exactly the model that is built. RoPE
# scaling is left out: it changes position frequencies, not the cost of a pass.
LLAMA_31_8B: dict[str, Any] = {
    "vocab_size": 128256,
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "max_position_embeddings": 131072,
    "rope_theta": 500000.0,
    "rms_norm_eps": 1e-5,
    "tie_word_embeddings": False,
}
LLAMA_31_70B_16L: dict[str, Any] = {
    **LLAMA_31_8B,
    "hidden_size": 8192,
    "intermediate_size": 28672,
    "num_hidden_layers": 16,
    "num_attention_heads": 64,
    "num_key_value_heads": 8,
}
TINY: dict[str, Any] = {
    **LLAMA_31_8B,
    "vocab_size": 512,
    "hidden_size": 128,
    "intermediate_size": 256,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 32,
    "max_position_embeddings": 4096,
}
ARCHITECTURES = {"llama-3.1-8b": LLAMA_31_8B, "llama-3.1-70b-16l": LLAMA_31_70B_16L}


@dataclass(frozen=True, slots=True)
class Sizes:
    """The measurement grid; the dry run shrinks it."""

    prefill: tuple[int, ...] = (1024, 4096, 16384, 32768)
    decode_batches: tuple[int, ...] = (1, 8, 32, 128)
    decode_context: int = 4096
    extend_tokens: int = 100
    extend_contexts: tuple[int, ...] = (4096, 32768)
    copy_tokens: int = 4096
    repeats: int = 5


DRY_SIZES = Sizes((32, 64), (1, 4), 64, 8, (64, 128), 64, 2)

# GPU name substrings -> catalog chip ids, most specific first.
CHIP_NAMES = (("H200", "h200"), ("H100", "h100-sxm"), ("H800", "h800"), ("H20", "h20"))


@dataclass(slots=True)
class Report:
    """Rows of (what, measured, model, unit) plus skipped cells; printed and written as JSON."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[dict[str, str]] = field(default_factory=list)

    def add(self, model: str, what: str, measured: float, reference: float, unit: str) -> None:
        ratio = measured / reference if reference > 0 else math.nan
        row = {
            "model": model,
            "what": what,
            "measured": measured,
            "roofline": reference,
            "ratio": ratio,
            "unit": unit,
        }
        self.rows.append(row)
        print(f"  {what:<34} {measured:>12.4g} {reference:>12.4g} {ratio:>8.2f}  {unit}")

    def skip(self, model: str, what: str, reason: str) -> None:
        self.skipped.append({"model": model, "what": what, "reason": reason})
        print(f"  {what:<34} skipped: {reason}")


# Variants whose memory and clocks differ from the SXM part the catalog holds: never guessed.
UNLISTED_VARIANTS = ("PCIE", "NVL")


def detect_chip(name: str, chips: dict[str, ChipSpec]) -> ChipSpec:
    """The catalog chip whose marketing name the device name contains (``ValueError`` if none).

    An H100 PCIe or NVL is not an H100 SXM (less bandwidth and compute), so such a name is an
    error asking for ``--chip`` rather than a silently wrong roofline.
    """
    upper = name.upper()
    for needle, chip_id in CHIP_NAMES:
        if needle in upper and chip_id in chips:
            if any(variant in upper for variant in UNLISTED_VARIANTS):
                break
            return chips[chip_id]
    raise ValueError(f"no catalog chip matches {name!r}; pass --chip with one of {sorted(chips)}")


def model_spec(name: str, config: dict[str, Any], params: int) -> ModelSpec:
    """The roofline's view of the built model: its real parameter count and shapes, bf16."""
    return ModelSpec(
        id=name,
        name=name,
        total_params_b=params / 1e9,
        active_params_b=params / 1e9,
        layers=config["num_hidden_layers"],
        hidden_size=config["hidden_size"],
        attention=Attention.GQA,
        attention_heads=config["num_attention_heads"],
        kv_heads=config["num_key_value_heads"],
        head_dim=config["head_dim"],
        kv_bytes_per_elem=2,
        weight_bytes_per_param=2,
    )


def run_model(
    name: str, bench: Bench, chip: ChipSpec, sizes: Sizes, report: Report, *, deadline: float
) -> None:
    """Every cell for one model; a cell past the deadline or over free memory is skipped."""
    config = bench.config
    spec = model_spec(name, config.to_dict(), bench.params)
    kv_token = spec.kv_bytes_per_token
    print(f"\n{name}: {bench.params / 1e9:.2f} B params on {chip.name} ({chip.id})")
    print(f"  {'what':<34} {'measured':>12} {'roofline':>12} {'ratio':>8}  unit")
    r, context, extend = sizes.repeats, sizes.decode_context, sizes.extend_tokens
    nic_ms_per_mib = MIB / (chip.scaleout_gbits_per_s * 1e9 / 8) * 1e3

    def kv_size() -> None:
        measured = bench.kv_bytes_per_token(context)
        report.add(name, "kv bytes/token", measured, kv_token, "B")

    def prefill(length: int) -> None:
        model_s = perf.prefill_time(spec, chip, length).seconds
        _add_s(report, name, f"prefill {length} tokens", bench.prefill(length, r), model_s)

    def decode(batch: int) -> None:
        model_s = perf.decode_step_time_uniform(spec, chip, batch, context).seconds
        what = f"decode step b={batch} @ {context}"
        _add_s(report, name, what, bench.decode_step(batch, context, r), model_s)

    def extend_at(ctx: int) -> None:
        model_s = perf.extend_time(spec, chip, extend, ctx).seconds
        _add_s(report, name, f"extend {extend} @ {ctx}", bench.extend(extend, ctx, r), model_s)

    def copies() -> None:
        export_s, import_s, nbytes = bench.kv_copy(sizes.copy_tokens, r)
        per_mib = 1e3 * MIB / nbytes
        report.add(name, "kv export to host, ms/MiB", export_s * per_mib, nic_ms_per_mib, "ms")
        report.add(name, "kv import from host, ms/MiB", import_s * per_mib, nic_ms_per_mib, "ms")

    # (label, bytes it needs on the device, measurement); activations of a long prefill are
    # a few hidden-size rows and the MLP's wide ones per token.
    cells: list[tuple[str, float, Callable[[], None]]] = [
        ("kv bytes/token", kv_token * context * 2, kv_size)
    ]
    act = 8 * config.intermediate_size * 2
    cells += [(f"prefill {n}", n * (kv_token + act), partial(prefill, n)) for n in sizes.prefill]
    cells += [
        (f"decode b={b}", b * (context + 1) * kv_token * 1.1, partial(decode, b))
        for b in sizes.decode_batches
    ]
    cells += [
        (f"extend @ {c}", (c + extend) * kv_token * 1.1, partial(extend_at, c))
        for c in sizes.extend_contexts
    ]
    cells.append(("kv export/import", sizes.copy_tokens * kv_token * 2, copies))
    for what, need, measure in cells:
        free = bench.free_bytes()
        if time.monotonic() > deadline:
            report.skip(name, what, "time budget spent")
        elif free is not None and need > 0.9 * free:
            report.skip(name, what, f"needs {need / GIB:.1f} GiB, {free / GIB:.1f} free")
        else:
            measure()


def _add_s(report: Report, model: str, what: str, measured_s: float, model_s: float) -> None:
    report.add(model, what, measured_s * 1e3, model_s * 1e3, "ms")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dry-run", action="store_true", help="CPU, tiny config, small sizes")
    parser.add_argument("--chip", help="catalog chip id (default: detected from the GPU name)")
    parser.add_argument("--models", nargs="+", default=list(ARCHITECTURES), choices=ARCHITECTURES)
    parser.add_argument("--budget-s", type=float, default=450.0, help="stop starting cells after")
    parser.add_argument("--out", default="gpu_check.json", help="JSON output path")
    args = parser.parse_args(argv)
    started = time.monotonic()

    import torch
    import transformers

    chips = load_chips()
    if args.dry_run:
        device, sizes, device_name = "cpu", DRY_SIZES, "cpu (dry run)"
        models = {"tiny-llama": TINY}
        chip = chips[args.chip or "h100-sxm"]
    else:
        if not torch.cuda.is_available():
            print("no CUDA device: run with --dry-run to check the script on the CPU")
            return 2
        device, sizes, device_name = "cuda", Sizes(), torch.cuda.get_device_name(0)
        models = {name: ARCHITECTURES[name] for name in args.models}
        chip = chips[args.chip] if args.chip else detect_chip(device_name, chips)
    torch.manual_seed(0)
    print(
        f"device: {device_name}; torch {torch.__version__}, transformers {transformers.__version__}"
    )
    report = Report()
    deadline = started + args.budget_s
    for name, config in models.items():
        bench = Bench(torch, transformers, config, device)
        try:
            run_model(name, bench, chip, sizes, report, deadline=deadline)
        finally:
            bench.close()
    elapsed = time.monotonic() - started
    result = {
        "device": device_name,
        "chip": chip.id,
        "dry_run": args.dry_run,
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "elapsed_s": elapsed,
        "rows": report.rows,
        "skipped": report.skipped,
    }
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(
        f"\nwrote {args.out} ({len(report.rows)} figures, {len(report.skipped)} skipped) "
        f"in {elapsed:.1f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
