"""The ``pdd`` command line: one verb module per area, registered here.

Each module of this package that exposes ``register(subparsers)`` is a verb: it adds its parser
and sets ``func`` to a callable taking the parsed arguments and returning an exit code. Modules
are imported when the parser is built, so they must stay cheap to import (heavy imports go
inside the verb).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from pdd_core import __version__
from pdd_core.errors import PddError


def verb_modules() -> list[str]:
    """Every module of this package that defines ``register``: adding a verb is adding a file."""
    import pkgutil

    return sorted(
        f"{__name__}.{info.name}"
        for info in pkgutil.iter_modules(__path__)
        if not info.name.startswith("_")
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pdd",
        description="PDD token factory: physics, simulation, planning and data-plane agents.",
    )
    parser.add_argument("--version", action="version", version=f"pdd {__version__}")
    subparsers = parser.add_subparsers(dest="verb", metavar="VERB")
    for name in verb_modules():
        module = importlib.import_module(name)
        if hasattr(module, "register"):
            module.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "func", None) is None:
        parser.print_help()
        return 0
    try:
        code: int = args.func(args)
    except (PddError, ValueError, OSError) as exc:
        print(f"pdd: error: {exc}", file=sys.stderr)
        return 2
    return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
