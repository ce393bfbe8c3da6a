"""Shared by the llama.cpp tests: the skip rule and the GGUF file of the TinyTransformer.

llama-cpp-python compiles from source (minutes), so a developer may not have it; CI installs it
(``.ci/run``), and there a missing package fails the run instead of skipping the tests.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest


def require_llama_cpp() -> None:
    """Skip the calling module without llama-cpp-python and gguf, except in CI (fail there)."""
    missing = [name for name in ("llama_cpp", "gguf") if importlib.util.find_spec(name) is None]
    if not missing:
        return
    message = f"{', '.join(missing)} not installed: pip install -e '.[llamacpp]'"
    if os.environ.get("CI"):
        pytest.fail(message, pytrace=False)
    pytest.skip(message, allow_module_level=True)


def tiny_gguf(directory: Path) -> Path:
    """The TinyTransformer (default config) exported to ``directory/tiny-test.gguf``."""
    from pdd_core.engine.gguf_export import ensure_tiny

    return ensure_tiny(directory / "tiny-test.gguf")
