"""`.env` is read at start-up, as `.env.example` says: it fills what the environment leaves out."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PRINT_PAGE_SIZE = "from django.conf import settings; print(settings.REST_FRAMEWORK['PAGE_SIZE'])"


def _page_size(env_file: Path, **extra: str) -> str:
    environ = {k: v for k, v in os.environ.items() if k != "PDD_API_PAGE_SIZE"}
    environ |= {"PDD_ENV_FILE": str(env_file), **extra}
    result = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", PRINT_PAGE_SIZE], cwd=ROOT, env=environ,
        check=True, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    return result.stdout.strip().splitlines()[-1]


def test_a_variable_in_the_env_file_is_used(tmp_path: Path) -> None:
    env_file = tmp_path / ".env"
    env_file.write_text("# a comment\nPDD_API_PAGE_SIZE=7\n")

    assert _page_size(env_file) == "7"


def test_the_environment_wins_over_the_env_file(tmp_path: Path) -> None:
    env_file = tmp_path / ".env"
    env_file.write_text("PDD_API_PAGE_SIZE=7\n")

    assert _page_size(env_file, PDD_API_PAGE_SIZE="9") == "9"


def test_a_malformed_value_in_the_env_file_stops_start_up_naming_it(tmp_path: Path) -> None:
    env_file = tmp_path / ".env"
    env_file.write_text("PDD_API_PAGE_SIZE=many\n")
    environ = {k: v for k, v in os.environ.items() if k != "PDD_API_PAGE_SIZE"}

    result = subprocess.run(
        [sys.executable, "manage.py", "check"], cwd=ROOT,
        env={**environ, "PDD_ENV_FILE": str(env_file)},
        check=False, capture_output=True, text=True, timeout=120,
    )  # fmt: skip

    assert result.returncode != 0
    assert "PDD_API_PAGE_SIZE: expected an integer, got 'many'" in result.stderr
