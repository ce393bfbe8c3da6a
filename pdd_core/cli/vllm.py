"""``pdd vllm``: start (or print) the vLLM instance behind one agent of a topology file.

With ``engine.kind = "vllm"`` every P, RLD and MD agent drives its own vLLM instance. This verb
reads the agent's settings (``pdd_core.engine.vllm.config``) and runs
``python -m vllm.entrypoints.openai.api_server`` with the PDD KV connector, so an operator
starts one instance per agent with one command and the two can never disagree on block size,
store directory or KV role.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from typing import Any


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "vllm",
        help="start the vLLM instance of one agent (engine kind vllm)",
        description="Run (or with --print show) the vLLM server command of one P, RLD or MD "
        "agent of a topology file, with the PDD KV connector configured.",
    )
    parser.add_argument("--config", required=True, help="data-plane topology file (JSON)")
    parser.add_argument("--id", required=True, help="the agent whose instance to start")
    parser.add_argument("--python", default=sys.executable, help="interpreter that has vLLM")
    parser.add_argument("--print", action="store_true", help="print the command, do not run it")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from pdd_core.agent.config import load_config
    from pdd_core.engine.vllm.config import instance_for, server_command

    config = load_config(args.config)
    if config.engine.kind != "vllm":
        raise ValueError(f"{args.config}: engine.kind is {config.engine.kind!r}, not vllm")
    agent = config.agent(args.id)
    if agent.role == "gateway":
        raise ValueError(f"{args.id}: a gateway has no engine")
    spec = instance_for(config.engine.vllm, agent.role, agent.id, config.engine.block_size)
    argv, env = server_command(spec, args.python)
    if args.print:
        prefix = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
        print((prefix + " " if prefix else "") + shlex.join(argv))
        return 0
    os.makedirs(spec.store_dir, exist_ok=True)
    os.execvpe(argv[0], argv, {**os.environ, **env})
