"""Token-ID handoff versus shipping KV: what MD pays to take over 100 tokens from RLD.

For each catalog model on its decode chip, handing over ``--tokens`` output tokens costs either
(a) a HANDOFF frame of token IDs across the WAN plus MD's extend (recompute) of those tokens
on its context, from ``pdd_core.perf``; or (b) their KV across the WAN, ``kv_bytes(model, n)``.
Both transfers are given by the physics (``transfer.transfer_time``) and measured through the
real WAN emulator on 127.0.0.1. A Python proxy cannot shape 10+ Gbps, so the measured column
runs the line at ``bandwidth x --scale`` with the KV payload scaled by the same factor: the
serialization time is unchanged and the round trip is real (the agents' ``payload_scale``).

    .venv/bin/python bench/bench_handoff.py [--bandwidth-gbps 10] [--rtt-ms 20] [--context 65536]
"""

from __future__ import annotations

import argparse
import asyncio

from pdd_core import perf
from pdd_core.agent.protocol import handoff_frame_size
from pdd_core.agent.wan.emulator import LineSettings, WanEmulator
from pdd_core.agent.wan.probe import start_probe_server, upload
from pdd_core.specs import load_chips, load_models
from pdd_core.transfer import transfer_time

PAIRS = (("ref-1t-mla", "gpu-b"), ("deepseek-v3", "h20"), ("llama-3.1-70b", "h20"),
         ("qwen3-32b", "ascend-910b"))  # fmt: skip


async def measure(settings: LineSettings, nbytes: int, repeat: int) -> float:
    """Best-of-``repeat`` upload time of ``nbytes`` through a fresh emulator and probe."""
    probe = await start_probe_server()
    upstream = ("127.0.0.1", probe.sockets[0].getsockname()[1])
    emulator = WanEmulator(listen=("127.0.0.1", 0), upstream=upstream, settings=settings)
    await emulator.start()
    reader, writer = await asyncio.open_connection(*emulator.address, limit=1 << 20)
    await upload(reader, writer, 1)
    best = min([await upload(reader, writer, nbytes) for _ in range(repeat)])
    writer.close()
    await emulator.close()
    probe.close()
    return best


async def run(args: argparse.Namespace) -> None:
    models, chips = load_models(), load_chips()
    line = LineSettings(args.bandwidth_gbps, args.rtt_ms)
    scaled = LineSettings(args.bandwidth_gbps * args.scale, args.rtt_ms)
    ids_bytes = handoff_frame_size(list(range(100_000, 100_000 + args.tokens)))
    ids_wire = transfer_time(line.link_spec(), ids_bytes)
    ids_measured = await measure(scaled, ids_bytes, args.repeat)
    print(
        f"handoff of {args.tokens} tokens at context {args.context}; line {args.bandwidth_gbps:g}"
        f" Gbps, RTT {args.rtt_ms:g} ms (measured at {scaled.bandwidth_gbps:g} Gbps with KV x"
        f" {args.scale:g}); times in ms"
    )
    print(f"token IDs: {ids_bytes} bytes on the wire; physics {ids_wire * 1e3:.2f},"
          f" measured {ids_measured * 1e3:.2f}")  # fmt: skip
    head = (f"{'model':<15}{'MD chip':<12}{'tp':>3}{'extend':>8}{'IDs total':>10}"
            f"{'KV MB':>8}{'KV phys':>9}{'KV meas':>9}{'KV/IDs':>8}{'KV@8 flows':>11}")  # fmt: skip
    print(head)
    for model_id, chip_id in PAIRS:
        model, chip = models[model_id], chips[chip_id]
        tp = perf.min_tp(model, chip, kv_tokens=args.context + args.tokens)
        extend = perf.extend_time(model, chip, args.tokens, args.context, tp).seconds
        ids_total = ids_wire + extend
        kv = perf.kv_bytes(model, args.tokens)
        kv_physics = transfer_time(line.link_spec(), kv)
        kv_measured = await measure(scaled, round(kv * args.scale), args.repeat)
        print(
            f"{model_id:<15}{chip_id:<12}{tp:>3}{extend * 1e3:>8.2f}{ids_total * 1e3:>10.2f}"
            f"{kv / 1e6:>8.2f}{kv_physics * 1e3:>9.2f}{kv_measured * 1e3:>9.2f}"
            f"{kv_physics / ids_total:>8.2f}"
            f"{transfer_time(line.link_spec(), kv, flows=8) * 1e3:>11.2f}"
        )
    print(
        "IDs total = IDs transfer (physics) + MD extend (perf); KV/IDs = KV physics / IDs total;"
        " KV@8 flows = the KV transfer while 8 flows share the line. Both pay one RTT; only the"
        " KV path uses bandwidth, so only it grows with contention and bandwidth jitter."
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokens", type=int, default=100)
    parser.add_argument("--context", type=int, default=65536)
    parser.add_argument("--bandwidth-gbps", type=float, default=10.0)
    parser.add_argument("--rtt-ms", type=float, default=20.0)
    parser.add_argument("--scale", type=float, default=0.02, help="KV and bandwidth factor")
    parser.add_argument("--repeat", type=int, default=3)
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
