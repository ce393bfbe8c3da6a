"""``pdd agent``: run one data-plane process (gateway, prefill, relay, main decode, or the WAN).

Every process reads the same configuration file (``pdd_core.agent.config``) and finds its own
address and its peers' there; ``pdd up`` starts a whole data plane this way.
"""

from __future__ import annotations

import argparse
from typing import Any


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "agent",
        help="run one data-plane agent (gateway | prefill | relay | main | wan)",
        description="Run one agent of the configuration file until SIGTERM or Ctrl-C. It "
        "prints 'ready ROLE ID ADDRESS' once it listens. The plane's shared secret is read from "
        "the 0600 file named by PDD_PLANE_SECRET_FILE, its TLS certificate from PDD_TLS_DIR; "
        "secrets never go on the command line.",
    )
    parser.add_argument(
        "--role", required=True, choices=("gateway", "prefill", "relay", "main", "wan")
    )
    parser.add_argument("--config", required=True, help="data-plane configuration (JSON)")
    parser.add_argument("--id", help="agent id in the file (default: the first of the role)")
    parser.add_argument(
        "--control-plane",
        metavar="URL",
        help="register with this control plane (agent token in PDD_CONTROL_TOKEN)",
    )
    parser.add_argument("--log-level", default="WARNING")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import logging
    import os
    from dataclasses import replace

    from pdd_core.agent.auth import WAN_TOKEN, AuthError, secret_from_env
    from pdd_core.agent.config import load_config
    from pdd_core.agent.run import LOG_FORMAT, ControlSettings, run_process
    from pdd_core.agent.tls import TLS_DIR_ENV, PlaneTls, TlsContexts

    logging.basicConfig(level=args.log_level, format=LOG_FORMAT)
    config = load_config(args.config)
    agent_id = args.id
    if agent_id is None and args.role != "wan":
        agent_id = config.of_role(args.role)[0].id
    config = replace(config, tls_dir=os.environ.get(TLS_DIR_ENV, ""))
    try:
        if args.role == "wan":  # the line forwards bytes; the agents on both ends authenticate
            secret_from_env(name=WAN_TOKEN)  # its control endpoint: the plane's token, over TLS
            TlsContexts.load(config.tls_dir, "wan")
        else:
            config = replace(config, plane_secret=secret_from_env())
            PlaneTls(config, agent_id or "").check()  # the certificate its connections need
    except AuthError as exc:
        print(f"pdd agent: {exc}")
        return 2
    control = None
    if args.control_plane:
        token = os.environ.get("PDD_CONTROL_TOKEN", "")
        if not token:
            print("pdd agent: --control-plane needs a token in PDD_CONTROL_TOKEN")
            return 2
        control = ControlSettings(args.control_plane, token)
    return run_process(config, args.role, agent_id or "wan", control)
