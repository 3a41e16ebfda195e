"""The Celery app of the portal, configured from Django settings (``CELERY_*``).

Tasks are acknowledged late (a worker killed mid-task leaves the message for
another worker) and must therefore be idempotent: every task loads its rows by
id and converges state; running it twice is harmless. Each task has an explicit
``name`` and retries with exponential backoff and jitter (see
:data:`RETRY_POLICY`). Periodic tasks are declared by the issues that need them
in ``CELERY_BEAT_SCHEDULE``.
"""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")

app = Celery("portal")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.conf.update(
    task_acks_late=True,
    task_reject_on_worker_lost=True,
    worker_prefetch_multiplier=1,
    task_track_started=True,
    task_serializer="json",
    result_serializer="json",
    accept_content=["json"],
    result_expires=3600,
    broker_connection_retry_on_startup=True,
)
app.autodiscover_tasks()

for _option in ("data_folder_in", "data_folder_out", "processed_folder", "control_folder"):
    # The filesystem transport of the embedded default needs its folders.
    _folder = (app.conf.broker_transport_options or {}).get(_option)
    if _folder:
        os.makedirs(_folder, exist_ok=True)
if str(app.conf.result_backend or "").startswith("file://"):
    os.makedirs(str(app.conf.result_backend)[len("file://"):], exist_ok=True)

#: Keyword arguments for ``@shared_task`` on tasks that talk to a service that may
#: be briefly away: retry up to 8 times, 2, 4, 8... seconds apart (capped at 300 s),
#: each delay jittered so that workers do not retry in lockstep.
RETRY_POLICY = {
    "autoretry_for": (ConnectionError, TimeoutError, OSError),
    "retry_backoff": 2,
    "retry_backoff_max": 300,
    "retry_jitter": True,
    "max_retries": 8,
}

# Celery signal handlers of every worker: the task context (task id, cluster) of each log
# line and JSON logs when configured; task outcomes and durations for GET /metrics.
import portal.logs  # noqa: E402,F401
import portal.metrics.signals  # noqa: E402,F401
