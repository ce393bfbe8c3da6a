"""pdd_core never imports Django (checked in a fresh interpreter)."""

from __future__ import annotations

import subprocess
import sys

CHECK = """
import sys, pkgutil, importlib
import pdd_core
for mod in pkgutil.walk_packages(pdd_core.__path__, "pdd_core."):
    if mod.name.endswith("__main__"):
        continue
    importlib.import_module(mod.name)
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
