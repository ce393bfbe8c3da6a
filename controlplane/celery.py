"""The Celery application; configuration comes from Django settings (``CELERY_*``).

With no ``REDIS_URL`` tasks run in-process (eager); with it, a worker
(``celery -A controlplane worker``) and beat (``celery -A controlplane beat``) consume from Redis.
The periodic schedule lives here, in one place, as later apps add jobs.
"""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings")

app = Celery("controlplane")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

app.conf.beat_schedule = {
    "telemetry-alerts-evaluate": {
        "task": "controlplane.telemetry.tasks.alerts_evaluate_task",
        "schedule": 5.0,
    },
    # staging.FLUSH_INTERVAL_S: the longest a committed rollup delta waits if its own ingestion
    # call could not flush it
    "telemetry-rollups-flush": {
        "task": "controlplane.telemetry.tasks.rollups_flush_task",
        "schedule": 2.0,
    },
    "telemetry-prune": {
        "task": "controlplane.telemetry.tasks.telemetry_prune_task",
        "schedule": 3600.0,
    },
}
