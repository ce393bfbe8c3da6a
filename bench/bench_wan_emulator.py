"""Emulator accuracy: configured physics (``transfer.transfer_time``) versus measured transfers.

Runs a probe server, the WAN emulator and the client in one process on 127.0.0.1, and prints,
for several sizes and bandwidths, the physics figure, the measured upload and download (best
of ``--repeat`` on a warmed-up connection) and their relative error; then two concurrent flows.
The emulator's contract (the issue) is within 10% for transfers of 1 MB and more; at higher
bandwidths the figure also shows where a Python proxy on this machine stops keeping up.

    .venv/bin/python bench/bench_wan_emulator.py [--rtt-ms 10] [--repeat 3]
"""

from __future__ import annotations

import argparse
import asyncio

from pdd_core.agent.wan.emulator import LineSettings, WanEmulator
from pdd_core.agent.wan.probe import download, start_probe_server, upload
from pdd_core.transfer import transfer_time

MB = 1024 * 1024
SIZES_MB = (1, 4, 16)
BANDWIDTHS_GBPS = (0.1, 0.2, 0.5, 1.0, 2.0)


async def run(rtt_ms: float, repeat: int) -> None:
    probe = await start_probe_server()
    upstream = ("127.0.0.1", probe.sockets[0].getsockname()[1])
    print(f"RTT {rtt_ms:g} ms, best of {repeat}; times in ms; error = measured / physics - 1")
    print(f"{'Gbps':>6}{'MB':>5}{'physics':>10}{'upload':>10}{'err':>8}{'download':>10}{'err':>8}")
    for gbps in BANDWIDTHS_GBPS:
        settings = LineSettings(bandwidth_gbps=gbps, rtt_ms=rtt_ms)
        emulator = WanEmulator(listen=("127.0.0.1", 0), upstream=upstream, settings=settings)
        await emulator.start()
        reader, writer = await asyncio.open_connection(*emulator.address, limit=MB)
        await upload(reader, writer, 1)
        for size in SIZES_MB:
            physics = transfer_time(settings.link_spec(), size * MB)
            up = min([await upload(reader, writer, size * MB) for _ in range(repeat)])
            down = min([await download(reader, writer, size * MB) for _ in range(repeat)])
            print(
                f"{gbps:>6g}{size:>5}{physics * 1e3:>10.1f}{up * 1e3:>10.1f}"
                f"{up / physics - 1:>+8.1%}{down * 1e3:>10.1f}{down / physics - 1:>+8.1%}"
            )
        writer.close()
        flows = []
        for _ in range(2):
            r, w = await asyncio.open_connection(*emulator.address, limit=MB)
            await upload(r, w, 1)
            flows.append((r, w))
        times = await asyncio.gather(*(upload(r, w, 4 * MB) for r, w in flows))
        physics = transfer_time(settings.link_spec(), 4 * MB, flows=2)
        shown = "  ".join(f"{t * 1e3:.1f} ({t / physics - 1:+.1%})" for t in times)
        print(f"{gbps:>6g}{'2x4':>5}{physics * 1e3:>10.1f}  two concurrent uploads: {shown}")
        for _, w in flows:
            w.close()
        await emulator.close()
    probe.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rtt-ms", type=float, default=10.0)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    asyncio.run(run(args.rtt_ms, args.repeat))


if __name__ == "__main__":
    main()
