"""The ``pdd`` command line: one verb module per area, registered here.

Each verb module exposes ``register(subparsers)``, which adds its parser and sets ``func`` to a
callable taking the parsed arguments and returning an exit code. Modules are imported when the
parser is built, so they must stay cheap to import (heavy imports go inside the verb).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from pdd_core import __version__

VERB_MODULES: tuple[str, ...] = (
    "pdd_core.cli.catalog",
    "pdd_core.cli.trace",
    "pdd_core.cli.perf",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pdd",
        description="PDD token factory: physics, simulation, planning and data-plane agents.",
    )
    parser.add_argument("--version", action="version", version=f"pdd {__version__}")
    subparsers = parser.add_subparsers(dest="verb", metavar="VERB")
    for name in VERB_MODULES:
        importlib.import_module(name).register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "func", None) is None:
        parser.print_help()
        return 0
    try:
        code: int = args.func(args)
    except (ValueError, OSError) as exc:
        print(f"pdd: error: {exc}", file=sys.stderr)
        return 2
    return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
