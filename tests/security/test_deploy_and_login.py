"""Login is throttled per username and address; every ``check --deploy`` warning is cleared by
a setting."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from typing import Any

import pytest
from django.test import Client

from tests.live_server import ROOT

pytestmark = pytest.mark.django_db

HTTPS_ENV = {
    "PDD_SECRET_KEY": secrets.token_urlsafe(60), "PDD_SECURE_COOKIES": "true",
    "PDD_SSL_REDIRECT": "true", "PDD_HSTS_SECONDS": "31536000",
    "PDD_HSTS_INCLUDE_SUBDOMAINS": "true", "PDD_HSTS_PRELOAD": "true", "PDD_DEBUG": "false",
}  # fmt: skip


def _check_deploy(extra: dict[str, str]) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PDD_")}
    env.update(PDD_DATA_DIR=os.environ.get("PDD_DATA_DIR", str(ROOT / "var")), **extra)
    return subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def test_check_deploy_passes_with_the_https_settings() -> None:
    result = _check_deploy(HTTPS_ENV)

    assert result.returncode == 0, result.stderr
    assert "no issues" in result.stdout


def test_check_deploy_names_what_is_missing_without_them() -> None:
    result = _check_deploy({})

    assert result.returncode == 1
    for warning in ("security.W004", "security.W008", "security.W012", "security.W016"):
        assert warning in result.stderr


def test_the_fifth_failed_login_locks_out_even_the_right_password(
    django_user_model: Any,
) -> None:
    django_user_model.objects.create_user("eve", password="right-pw-123")
    client = Client(REMOTE_ADDR="10.0.0.7")

    failures = [
        client.post("/accounts/login/", {"username": "eve", "password": f"wrong-{i}"}).status_code
        for i in range(5)
    ]
    locked = client.post("/accounts/login/", {"username": "eve", "password": "right-pw-123"})

    assert failures == [200, 200, 200, 200, 429]  # the form again with its error, then locked
    assert locked.status_code == 429
    assert "_auth_user_id" not in client.session


def test_another_address_is_not_locked_out(django_user_model: Any) -> None:
    django_user_model.objects.create_user("eve", password="right-pw-123")
    attacker = Client(REMOTE_ADDR="10.0.0.7")
    for i in range(5):
        attacker.post("/accounts/login/", {"username": "eve", "password": f"wrong-{i}"})

    owner = Client(REMOTE_ADDR="10.0.0.8").post(
        "/accounts/login/", {"username": "eve", "password": "right-pw-123"}
    )

    assert owner.status_code == 302
