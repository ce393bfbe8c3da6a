"""``pdd up``: a whole data plane on this machine, from one topology file, until Ctrl-C.

Starts the gateway, the prefill and relay agents of site A, the main-decode agents of site B
and the WAN emulator between the sites (``pdd_core.agent.supervisor.plane``), prints the gateway URL
and a fresh API key of the ``demo`` tenant, restarts a child that dies (with backoff, saying
so on its output), and stops every child on Ctrl-C or SIGTERM.

``--control-plane URL`` registers every agent with a control plane. Agent tokens never go on
the command line (``ps`` would show them): ``PDD_CONTROL_TOKENS`` in the environment holds one
token for all sites or ``SITE=TOKEN`` pairs separated by commas (agent tokens are bound to a
site; ``pdd up`` emulates both sites on one machine), or ``--token-file PATH`` names a file
readable by its owner only with one ``[SITE=]TOKEN`` per line. Without ``--control-plane``
the plane runs standalone.

Joined to a control plane, one reconciler per site (``agent.supervisor.reconcile``) polls the site's
desired state (``GET /api/v1/sites/{slug}/desired/``, with that site's token) and starts,
drains and stops agents to match the active plan; ``--desired FILE`` reads it from a file
instead (a plane without a control plane).
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
    parser.add_argument("--control-plane", metavar="URL", help="register every agent here")
    parser.add_argument(
        "--token-file",
        metavar="PATH",
        help="agent tokens, one [SITE=]TOKEN per line, in a 0600 file (or PDD_CONTROL_TOKENS)",
    )
    parser.add_argument(
        "--desired",
        metavar="FILE",
        help="reconcile every site to the desired state in FILE (JSON, re-read every 2 s) "
        "instead of the control plane's",
    )
    parser.set_defaults(func=run)


TOKENS_ENV = "PDD_CONTROL_TOKENS"


def read_tokens(path: str | None, environ: dict[str, str] | None = None) -> list[str]:
    """The ``[SITE=]TOKEN`` items of ``--token-file`` or else ``PDD_CONTROL_TOKENS``.

    ``ValueError`` if the file is readable by anyone but its owner (a token file is a key).
    """
    import os
    import stat
    from pathlib import Path

    if path:
        target = Path(path)
        if target.stat().st_mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise ValueError(f"--token-file: {path} must be readable by its owner only")
        return [line.strip() for line in target.read_text().splitlines() if line.strip()]
    env = os.environ if environ is None else environ
    return [item.strip() for item in env.get(TOKENS_ENV, "").split(",") if item.strip()]


def parse_tokens(values: list[str]) -> dict[str, str]:
    """``["TOKEN"]`` -> ``{"": TOKEN}``; ``["dc-a=T1", "dc-b=T2"]`` -> per site."""
    tokens: dict[str, str] = {}
    for value in values:
        site, sep, token = value.partition("=")
        tokens[site if sep else ""] = token if sep else value
    return tokens


def run(args: argparse.Namespace) -> int:
    import signal
    import sys
    import tempfile
    import threading

    from pdd_core.agent.supervisor.plane import DataPlane
    from pdd_core.agent.supervisor.reconcile import control_plane_source, file_source

    try:
        tokens = parse_tokens(read_tokens(args.token_file))
    except (OSError, ValueError) as exc:
        print(f"pdd up: {exc}", flush=True)
        return 2
    if args.control_plane and not tokens:
        print(f"pdd up: --control-plane needs agent tokens ({TOKENS_ENV} or --token-file)")
        return 2
    if not args.control_plane:
        tokens = {}
    run_dir = args.run_dir or tempfile.mkdtemp(prefix="pdd-up-")
    try:
        plane = DataPlane(args.topology, run_dir, control_plane=args.control_plane, tokens=tokens)
    except ValueError as exc:
        print(f"pdd up: {exc}", flush=True)
        return 2
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
    note = " (until the control plane pushes keys of its own)" if args.control_plane else ""
    print(f"api key: {plane.api_key}{note}", flush=True)
    print(f"wan control: http://{host}:{port} (bearer token in {plane.wan_token_path})")
    print(f"run dir: {run_dir}")
    if args.control_plane:
        print(f"control plane: {args.control_plane} (every agent registers there)")
    print("pids: " + " ".join(f"{k}={v}" for k, v in plane.pids().items()), flush=True)
    print("press Ctrl-C to stop", flush=True)

    def say(line: str) -> None:  # one write per line: the sites' reconcilers say things at once
        sys.stdout.write(line + "\n")
        sys.stdout.flush()

    plane.supervise(say)
    sites = sorted({a.site for a in plane.config.agents})
    if args.desired:
        plane.reconcile({site: file_source(args.desired, site) for site in sites}, say)
    elif args.control_plane:
        plane.reconcile(
            {site: control_plane_source(args.control_plane, tokens.get(site, tokens.get("", "")),
                                        site) for site in sites},
            say,
        )  # fmt: skip
    try:
        while not stop.wait(0.5):
            pass
    finally:
        plane.stop()
        print("pdd up: stopped", flush=True)
    return 0
