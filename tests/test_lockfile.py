"""The lockfiles in requirements/ match pyproject.toml: every exact pin is locked at that version.

A dependency added to pyproject.toml without `make lock` fails here with the command to run.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PIN = re.compile(r"^([A-Za-z0-9_.\-]+)(\[[^\]]*\])?==([^\s;]+)")


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _pins(requirements: list[str]) -> dict[str, str]:
    pins = {}
    for line in requirements:
        match = PIN.match(line.strip())
        assert match, f"pyproject.toml: {line!r} is not pinned exactly (name==version)"
        pins[_normalise(match.group(1))] = match.group(3)
    return pins


def _locked(path: Path) -> dict[str, str]:
    locked = {}
    for line in path.read_text().splitlines():
        match = PIN.match(line)
        if match:
            locked[_normalise(match.group(1))] = match.group(3)
    return locked


def _project() -> dict[str, object]:
    project: dict[str, object] = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return project


def test_runtime_lock_pins_every_runtime_dependency_at_its_version() -> None:
    wanted = _pins(_project()["dependencies"])  # type: ignore[arg-type]
    locked = _locked(ROOT / "requirements" / "runtime.txt")

    stale = {n: v for n, v in wanted.items() if locked.get(n) != v}
    assert stale == {}, "requirements/runtime.txt is stale: run `make lock`"


def test_dev_lock_pins_runtime_and_dev_dependencies_at_their_versions() -> None:
    project = _project()
    wanted = _pins(project["dependencies"])  # type: ignore[arg-type]
    wanted |= _pins(project["optional-dependencies"]["dev"])  # type: ignore[index]
    locked = _locked(ROOT / "requirements" / "dev.txt")

    stale = {n: v for n, v in wanted.items() if locked.get(n) != v}
    assert stale == {}, "requirements/dev.txt is stale: run `make lock`"


def test_both_locks_agree_on_shared_packages_and_carry_hashes() -> None:
    runtime = _locked(ROOT / "requirements" / "runtime.txt")
    dev = _locked(ROOT / "requirements" / "dev.txt")

    assert {n: dev.get(n) for n in runtime} == runtime
    for name in ("runtime", "dev"):
        text = (ROOT / "requirements" / f"{name}.txt").read_text()
        assert "--hash=sha256:" in text


def test_supported_pythons_are_311_to_313() -> None:
    assert _project()["requires-python"] == ">=3.11,<3.14"
