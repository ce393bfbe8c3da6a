"""Every error class ``pdd_core`` defines derives from ``PddError`` (issue 30: one root that the
command line and the control plane map), and the command line maps one it raises to exit 2."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from typing import Any

import pytest

import pdd_core
from pdd_core import cli
from pdd_core.agent.protocol import ProtocolError
from pdd_core.errors import PddError


def _error_classes() -> list[type[BaseException]]:
    found = []
    for info in pkgutil.walk_packages(pdd_core.__path__, prefix="pdd_core."):
        if info.name.endswith("__main__"):  # running it is the command line
            continue
        try:
            module = importlib.import_module(info.name)
        except ImportError:  # an optional engine (vLLM, llama.cpp) not installed here
            continue
        for name, value in vars(module).items():
            if (
                inspect.isclass(value)
                and issubclass(value, BaseException)
                and value.__module__ == module.__name__
                and not name.startswith("_")
            ):
                found.append(value)
    return found


def test_every_public_error_of_the_library_derives_from_the_root() -> None:
    classes = _error_classes()
    assert len(classes) >= 15  # the walk found the library's errors
    assert [c.__qualname__ for c in classes if not issubclass(c, PddError)] == []


def test_the_command_line_maps_a_library_error_to_exit_2(
    monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    def refuse(_args: object) -> int:
        raise ProtocolError("frame too large: 9000000 bytes")

    parser = cli.build_parser()
    monkeypatch.setattr(cli, "build_parser", lambda: parser)
    parser.set_defaults(func=refuse)

    assert cli.main([]) == 2
    assert "pdd: error: frame too large" in capsys.readouterr().err
