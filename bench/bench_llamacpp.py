"""What the real engine costs: llama.cpp on this CPU beside the roofline for the same model.

Exports a CPU-sized TinyTransformer (default 8 layers x 512, 27.5M parameters, F32 weights,
F16 KV) to GGUF, runs it through ``LlamaCppEngine`` and prints, each beside the roofline
prediction of ``pdd_core.perf`` for the same model on this CPU (peak FLOP/s from the core count,
clock and SIMD width in /proc/cpuinfo; memory bandwidth measured here with a numpy copy; both
stated in the output):

- prefill tokens/s, decode tokens/s at batch 1, 8 and 32;
- KV bytes per token (llama.cpp's state bytes beside the model-shape formula);
- KV export and import time per MB (``llama_state_seq_get_data`` + split into blocks; join +
  ``llama_state_seq_set_data``);
- the handoff choice on the demo WAN (``fixtures/dataplane/llamacpp.json``): ship the KV of the
  ``k`` tokens RLD emitted, or hand over their token IDs and let MD extend over them.

``--profile-out FILE`` writes the measurements as a measured profile (``docs/profiles.md``) that
``pdd_core.perf`` then uses instead of the roofline (``PDD_PROFILES=FILE``).

    python bench/bench_llamacpp.py [--layers 8 --dim 512 --threads 2 --profile-out FILE]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pdd_core import perf  # noqa: E402
from pdd_core.engine.gguf_export import export_tiny  # noqa: E402
from pdd_core.engine.llamacpp import LlamaCppEngine, open_engine  # noqa: E402
from pdd_core.engine.llamacpp_config import LlamaCppSettings  # noqa: E402
from pdd_core.engine.protocol import DecodeState  # noqa: E402
from pdd_core.engine.tiny import TinyConfig  # noqa: E402
from pdd_core.profile import MeasuredProfile  # noqa: E402
from pdd_core.specs import ChipSpec, ModelSpec  # noqa: E402

DEMO = ROOT / "fixtures" / "dataplane" / "llamacpp.json"
BATCHES = (1, 8, 32)


def best(fn: Callable[[], object], repeats: int) -> float:
    """Median wall seconds of ``repeats`` calls (the box is shared: the median damps spikes)."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def cpu_chip(threads: int) -> tuple[ChipSpec, str]:
    """This CPU as a ``ChipSpec``: FP32 peak from the clock in /proc/cpuinfo and the SIMD width
    the llama.cpp build uses (``llama_print_system_info``), bandwidth measured."""
    import llama_cpp

    info = Path("/proc/cpuinfo").read_text()
    built = llama_cpp.llama_print_system_info().decode()
    mhz = [float(line.split(":")[1]) for line in info.splitlines() if line.startswith("cpu MHz")]
    ghz = (statistics.mean(mhz) if mhz else 2000.0) / 1000
    lanes = 16 if "AVX512 = 1" in built else 8 if "AVX2 = 1" in built else 4
    fma = 2 if "FMA = 1" in built else 1
    flops_per_cycle = 2 * lanes * fma  # two FMA ports x lanes x 2 FLOPs, per core
    peak = threads * ghz * 1e9 * flops_per_cycle
    source = np.ones(64 * 2**20 // 8)
    target = np.empty_like(source)
    copy_s = best(lambda: np.copyto(target, source), 5)
    bandwidth = 2 * source.nbytes / copy_s  # read + write
    meminfo = Path("/proc/meminfo").read_text().split()
    chip = ChipSpec(
        id="this-cpu",
        name=f"{threads} core(s) of this machine",
        bf16_tflops=peak / 1e12,
        hbm_gib=int(meminfo[meminfo.index("MemTotal:") + 1]) / 2**20,
        hbm_tbps=bandwidth / 1e12,
        scaleup_gbytes_per_s=1.0,
        scaleout_gbits_per_s=1.0,
        price_per_hour=0.0,
    )
    note = (
        f"peak {peak / 1e9:.0f} GFLOP/s = {threads} cores x {ghz:.2f} GHz x {flops_per_cycle} "
        f"FLOP/cycle (FP32, {'AVX-512' if lanes == 16 else 'AVX2' if lanes == 8 else 'SSE'}"
        f"{' FMA' if fma == 2 else ''}); memory {bandwidth / 1e9:.1f} GB/s (numpy copy, measured);"
        f" efficiencies {chip.compute_efficiency}/{chip.memory_efficiency} (the catalog defaults)"
    )
    return chip, note


def model_spec(config: TinyConfig) -> ModelSpec:
    c = config
    per_layer = (
        c.dim * (c.heads + 2 * c.kv_heads) * c.head_dim
        + c.heads * c.head_dim * c.dim
        + 3 * c.dim * c.mlp_hidden
        + 2 * c.dim
    )
    params = c.layers * per_layer + 2 * c.vocab_size * c.dim + c.dim
    return ModelSpec(
        id="tiny-cpu",
        name=f"TinyTransformer {c.layers}x{c.dim}",
        total_params_b=params / 1e9,
        active_params_b=params / 1e9,
        layers=c.layers,
        hidden_size=c.dim,
        attention="gqa" if c.kv_heads < c.heads else "mha",  # type: ignore[arg-type]
        attention_heads=c.heads,
        kv_heads=c.kv_heads,
        head_dim=c.head_dim,
        kv_bytes_per_elem=2.0,  # F16 KV
        weight_bytes_per_param=4.0,  # F32 GGUF
        max_context=32_768,
    )


def decode_rate(engine: LlamaCppEngine, batch: int, context: int, steps: int) -> float:
    """Seconds of one decode step of ``batch`` sequences of ``context`` tokens (median).

    The sequences fork one prefilled context (each recomputes only its last token), so setting
    up batch 32 costs one prefill; each sequence still attends over its own ``context`` cells.
    """
    rng = np.random.default_rng(batch)
    prompt = [int(t) for t in rng.integers(0, 256, context)]
    base = engine.prefill(prompt).kv
    states = []
    for i in range(batch):
        result = engine.prefill(prompt, base)
        states.append(DecodeState(str(i), result.kv, result.first_token))
    engine.decode_step(states)  # warm-up
    return best(lambda: engine.decode_step(states), steps)


@dataclass(frozen=True)
class Measured:
    """What llama.cpp took on this CPU: a prefill, a decode step per batch, the KV's export
    and import (``megabytes`` of it), and extends of ``k`` tokens over the long context."""

    prefill_s: float
    steps: dict[int, float]  # batch -> seconds of one decode step
    megabytes: float
    export_s: float
    import_s: float
    kv_per_token: int
    extend_s: dict[int, float]  # k -> seconds of the extend


def measure(config: TinyConfig, args: argparse.Namespace) -> Measured:
    """Export ``config`` to GGUF and time it through ``LlamaCppEngine``."""
    with tempfile.TemporaryDirectory() as tmp:
        gguf = export_tiny(Path(tmp) / "bench.gguf", config)
        settings = LlamaCppSettings(
            gguf=str(gguf), threads=args.threads, n_ctx=16_384, max_sequences=64
        )
        with open_engine(settings) as engine:
            rng = np.random.default_rng(0)
            prompt = [int(t) for t in rng.integers(0, 256, args.prefill_tokens)]
            engine.prefill(prompt[:16])  # warm-up
            prefill_s = best(lambda: engine.prefill(prompt), 3)
            steps = {b: decode_rate(engine, b, args.context, args.steps) for b in BATCHES}
            long = engine.prefill(prompt * 4).kv
            blocks = engine.export_blocks(long)
            megabytes = sum(len(b.data) for b in blocks) / 1e6
            export_s = best(lambda: engine.export_blocks(long), 5)
            import_s = best(lambda: engine.import_blocks(blocks), 5)
            kv_per_token = engine.kv_bytes_per_token
            extend_s = {
                k: best(lambda k=k: engine.extend(long, prompt[:k]), 3) for k in (4, 16, 64)
            }
    return Measured(prefill_s, steps, megabytes, export_s, import_s, kv_per_token, extend_s)


def print_rates(spec: ModelSpec, chip: ChipSpec, m: Measured, args: argparse.Namespace) -> None:
    """Prefill and decode rates and the KV's size beside the roofline's, and the KV's export
    and import time per MB."""
    roof_prefill = perf.prefill_time(spec, chip, args.prefill_tokens)
    print(f"{'figure':<34}{'measured':>14}{'roofline':>14}{'meas/roof':>11}")

    def row(name: str, measured: float, predicted: float, fmt: str = ",.0f") -> None:
        ratio = measured / predicted if predicted else float("nan")
        print(f"{name:<34}{measured:>14{fmt}}{predicted:>14{fmt}}{ratio:>11.2f}")

    row(
        f"prefill tokens/s ({args.prefill_tokens} tok)",
        args.prefill_tokens / m.prefill_s,
        args.prefill_tokens / roof_prefill.seconds,
    )
    for batch, seconds in m.steps.items():
        roof = perf.decode_step_time_uniform(spec, chip, batch, args.context)
        row(f"decode tokens/s, batch {batch}", batch / seconds, batch / roof.seconds)
    row("KV bytes per token", m.kv_per_token, perf.kv_bytes(spec, 1))
    print(f"{'KV export s per MB':<34}{m.export_s / m.megabytes:>14.4f}{'-':>14}")
    print(f"{'KV import s per MB':<34}{m.import_s / m.megabytes:>14.4f}{'-':>14}")
    print(
        f"(roofline bound: prefill {roof_prefill.bound}, decode "
        f"{perf.decode_step_time_uniform(spec, chip, 1, args.context).bound}; the KV row's "
        "excess is llama.cpp's 12 B of cell bookkeeping per token)"
    )


def print_handoffs(spec: ModelSpec, chip: ChipSpec, m: Measured, args: argparse.Namespace) -> None:
    """The handoff of ``k`` RLD tokens on the demo WAN: ship their KV, or their token IDs for
    MD to extend over (measured, and by the roofline)."""
    demo = json.loads(DEMO.read_text())
    wan_gbps, rtt_s = float(demo["wan"]["bandwidth_gbps"]), float(demo["wan"]["rtt_ms"]) / 1e3
    print(f"handoff of k RLD tokens on the demo WAN ({wan_gbps} Gbps, {rtt_s * 1e3:.0f} ms RTT):")
    print(f"{'k':>5}{'ship KV s':>12}{'extend s':>12}{'extend (roof) s':>17}  choice / roofline's")
    for k, ext in m.extend_s.items():
        size_mb = k * m.kv_per_token / 1e6
        ship = (
            rtt_s + k * m.kv_per_token * 8 / (wan_gbps * 1e9)
            + size_mb * (m.export_s + m.import_s) / m.megabytes
        )  # fmt: skip
        extend = rtt_s + ext  # token IDs are a few bytes: one round trip plus the recompute
        roof = rtt_s + perf.extend_time(spec, chip, k, 4 * args.prefill_tokens).seconds
        choice = "extend (token IDs)" if extend <= ship else "ship KV"
        roof_choice = "extend (token IDs)" if roof <= ship else "ship KV"
        print(f"{k:>5}{ship:>12.4f}{extend:>12.4f}{roof:>17.4f}  {choice} / {roof_choice}")


def write_profile(m: Measured, args: argparse.Namespace) -> None:
    """The measurements as a measured profile ``pdd_core.perf`` uses (``PDD_PROFILES``)."""
    profile = MeasuredProfile(
        model=args.model_id,
        chip=args.chip_id,
        prefill_tokens_per_s=args.prefill_tokens / m.prefill_s,
        decode_step_s=tuple(m.steps.items()),
        kv_bytes_per_token=float(m.kv_per_token),
        export_s_per_mb=m.export_s / m.megabytes,
        import_s_per_mb=m.import_s / m.megabytes,
        prefill_tokens=args.prefill_tokens,
        decode_context=args.context,
        source=f"bench/bench_llamacpp.py, llama-cpp-python, {args.threads} thread(s)",
    )
    args.profile_out.write_text(json.dumps(profile.to_dict(), indent=2) + "\n")
    print(f"\nprofile written to {args.profile_out} (use with PDD_PROFILES={args.profile_out})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--dim", type=int, default=512)
    parser.add_argument("--threads", type=int, default=1, help="llama.cpp threads (and cores)")
    parser.add_argument("--prefill-tokens", type=int, default=256)
    parser.add_argument("--context", type=int, default=128, help="decode context per sequence")
    parser.add_argument("--steps", type=int, default=5, help="decode steps timed per batch")
    parser.add_argument("--profile-out", type=Path)
    parser.add_argument("--model-id", default="tiny-cpu", help="model id the profile is for")
    parser.add_argument("--chip-id", default="this-cpu", help="chip id the profile is for")
    args = parser.parse_args()

    heads = args.dim // 64
    config = TinyConfig(
        dim=args.dim, layers=args.layers, heads=heads, kv_heads=heads, head_dim=64,
        mlp_hidden=3 * args.dim,
    )  # fmt: skip
    spec = model_spec(config)
    chip, chip_note = cpu_chip(args.threads)
    measured = measure(config, args)
    print(f"model: {spec.name}, {spec.total_params_b * 1e3:.1f}M parameters, F32 weights, F16 KV")
    print(f"chip (roofline inputs): {chip_note}")
    print()
    print_rates(spec, chip, measured, args)
    print()
    print_handoffs(spec, chip, measured, args)
    if args.profile_out:
        write_profile(measured, args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
