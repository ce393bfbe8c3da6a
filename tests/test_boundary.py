"""pdd_core never imports Django (checked in a fresh interpreter)."""

from __future__ import annotations

import subprocess
import sys

# Engine plug-ins that a real engine loads (vLLM's KV connector) import that engine; where its
# optional extra is not installed they cannot be imported at all, which is not a boundary breach.
CHECK = """
import sys, pkgutil, importlib
import pdd_core
OPTIONAL = {"torch", "vllm", "llama_cpp", "transformers", "gguf"}
for mod in pkgutil.walk_packages(pdd_core.__path__, "pdd_core."):
    if mod.name.endswith("__main__"):
        continue
    try:
        importlib.import_module(mod.name)
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] not in OPTIONAL:
            raise
bad = sorted(m for m in sys.modules if m.split(".")[0] in
             {"django", "rest_framework", "celery", "channels", "controlplane", "daphne"})
print(",".join(bad))
"""


def test_importing_every_pdd_core_module_loads_no_django() -> None:
    result = subprocess.run(
        [sys.executable, "-c", CHECK], capture_output=True, text=True, check=True, timeout=120
    )

    assert result.stdout.strip() == ""


def test_pdd_help_works() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "pdd_core", "--help"],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert result.returncode == 0
    assert "usage: pdd" in result.stdout
