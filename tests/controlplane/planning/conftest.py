"""Run planning jobs in-process for these tests, whatever ``REDIS_URL`` says.

With ``REDIS_URL`` set the suite's Celery is not eager (a worker would consume), but the REST
flow is tested here with the job in-process; the real worker is ``tests/system``'s business.
"""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def eager_celery(monkeypatch: pytest.MonkeyPatch) -> None:
    from controlplane.celery import app

    monkeypatch.setitem(app.conf, "task_always_eager", True)
    monkeypatch.setitem(app.conf, "task_eager_propagates", True)
