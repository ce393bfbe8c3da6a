"""``pdd wan``: run the WAN link emulator between two data-plane agents.

The cross-site hop of a one-machine demo goes through this proxy so transfer times follow the
configured line (``pdd_core.agent.wan.emulator``); ``--control`` opens the endpoint that
degrades or cuts the line at run time and reports byte counters (``pdd_core.agent.wan.control``).
"""

from __future__ import annotations

import argparse
from typing import Any

from pdd_core.transfer import IW10_BYTES


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "wan",
        help="TCP proxy that emulates a WAN line (bandwidth, RTT, jitter)",
        description="Proxy --listen to --upstream through an emulated line: the capacity is "
        "shared fairly by the connections using it (per direction), each direction adds "
        "RTT/2 plus seeded jitter. With --control, an HTTP/JSON endpoint (bearer token from "
        "$PDD_WAN_TOKEN_FILE, a 0600 file, or $PDD_WAN_TOKEN; never on the command line) "
        "serves GET /counters, POST /degrade, POST /cut, "
        "POST /restore.",
    )
    parser.add_argument("--listen", required=True, type=_address, help="HOST:PORT to accept on")
    parser.add_argument("--upstream", required=True, type=_address, help="HOST:PORT to reach")
    parser.add_argument("--bandwidth-gbps", type=float, required=True)
    parser.add_argument("--rtt-ms", type=float, default=0.0)
    parser.add_argument("--jitter-ms", type=float, default=0.0, help="one-way delay spread")
    parser.add_argument(
        "--initial-window-bytes", type=float, default=IW10_BYTES,
        help="TCP window a connection starts from and restarts from after 200 ms idle "
        "(default RFC 6928's 14,600 B, as the simulator; 0: always warm)",
    )  # fmt: skip
    parser.add_argument("--seed", type=int, default=0, help="seed of the jitter draws")
    parser.add_argument("--control", type=_address, help="HOST:PORT of the control endpoint")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import asyncio
    import logging

    from pdd_core.agent.auth import WAN_TOKEN, AuthError, secret_from_env
    from pdd_core.agent.run import LOG_FORMAT
    from pdd_core.agent.wan.control import ControlServer
    from pdd_core.agent.wan.emulator import LineSettings, WanEmulator

    settings = LineSettings(
        args.bandwidth_gbps, args.rtt_ms, args.jitter_ms, args.initial_window_bytes
    )
    token = ""
    if args.control:
        try:
            token = secret_from_env(name=WAN_TOKEN).decode()
        except AuthError as exc:
            raise ValueError(f"--control needs a token: {exc}") from None
    logging.basicConfig(level=logging.INFO, format=LOG_FORMAT)

    async def serve() -> None:
        emulator = WanEmulator(
            listen=args.listen, upstream=args.upstream, settings=settings, seed=args.seed
        )
        await emulator.start()
        host, port = emulator.address
        print(f"pdd wan: {host}:{port} -> {args.upstream[0]}:{args.upstream[1]} {settings}")
        if args.control:
            control = ControlServer(
                emulator, token=token, host=args.control[0], port=args.control[1]
            )
            await control.start()
            print(f"pdd wan: control on {control.address[0]}:{control.address[1]}")
        await asyncio.Event().wait()  # until interrupted

    try:
        asyncio.run(serve())
    except KeyboardInterrupt:
        return 0
    return 0


def _address(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) < 65536:
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {text!r}")
    return host, int(port)
