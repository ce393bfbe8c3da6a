"""``pdd up``: a whole data plane on this machine, from one topology file, until Ctrl-C.

Starts the gateway, the prefill and relay agents of site A, the main-decode agents of site B
and the WAN emulator between the sites (``pdd_core.agent.supervisor``), prints the gateway URL
and a fresh API key of the ``demo`` tenant, and stops every child on Ctrl-C or SIGTERM.
"""

from __future__ import annotations

import argparse
from typing import Any


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "up",
        help="start a demo data plane (gateway, P, RLD, MD, WAN emulator) on loopback",
        description="Start every agent of TOPOLOGY_FILE (fixtures/dataplane/*.json) on free "
        "loopback ports with the WAN emulator between the sites; print the gateway URL and a "
        "tenant API key; stop them all on Ctrl-C or SIGTERM.",
    )
    parser.add_argument("topology", metavar="TOPOLOGY_FILE")
    parser.add_argument("--run-dir", help="where to write the resolved config, logs, journals")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds to start (bound)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import signal
    import tempfile
    import threading

    from pdd_core.agent.supervisor import DataPlane

    run_dir = args.run_dir or tempfile.mkdtemp(prefix="pdd-up-")
    plane = DataPlane(args.topology, run_dir)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    try:
        plane.start(args.timeout)
    except RuntimeError as exc:
        print(f"pdd up: {exc}", flush=True)
        return 1
    host, port = plane.wan_control
    print(f"gateway: {plane.gateway_url}", flush=True)
    print(f"api key: {plane.api_key}", flush=True)
    print(f"wan control: http://{host}:{port} (token {plane.config.wan.control_token})")
    print(f"run dir: {run_dir}")
    print("pids: " + " ".join(f"{k}={v}" for k, v in plane.pids().items()), flush=True)
    print("press Ctrl-C to stop", flush=True)
    try:
        while not stop.wait(0.5):
            dead = [k for k, c in plane.children.items() if c.poll() is not None]
            if dead:
                print(f"pdd up: exited: {', '.join(dead)} (others keep running)", flush=True)
                for name in dead:
                    plane.children.pop(name)
    finally:
        plane.stop()
        print("pdd up: stopped", flush=True)
    return 0
