"""The one way a service queues a Celery task: by the task's registered name.

An app's ``tasks.py`` holds ``<entity>_<verb>_task(id)``, which fetches by id and calls a service;
services schedule tasks (after commit). Naming the task instead of importing it keeps that arrow
one way: tasks import services, services never import tasks. Each app's ``ready()`` imports its
``tasks`` module, so every task is registered in every process that runs Django, and under eager
Celery (the embedded defaults, no worker) a task queued by name runs in-process as before.
"""

from __future__ import annotations

from typing import Any

from celery import current_app


def task_delay(name: str, *args: Any) -> None:
    """``delay(*args)`` on the task registered as ``name``: to a worker, or in-process under
    eager Celery. An unknown name raises ``celery.exceptions.NotRegistered`` (never a message
    that no worker would take)."""
    current_app.tasks[name].delay(*args)
