"""The job tasks are registered under their names and the status sync is periodic."""

from django.conf import settings

from portal.celery import app


def test_job_tasks_are_registered_with_portal_names():
    import portal.tasks  # noqa: F401 - registers the tasks

    assert {"portal.job_create", "portal.job_cancel", "portal.job_sync",
            "portal.jobs_sync"} <= set(app.tasks)


def test_cluster_facing_job_tasks_retry_with_backoff():
    import portal.tasks as tasks

    for task in (tasks.job_create_task, tasks.job_cancel_task, tasks.job_sync_task):
        assert task.retry_backoff == 2 and task.retry_jitter is True
        assert task.max_retries == 8


def test_jobs_are_synced_every_15_seconds():
    entry = settings.CELERY_BEAT_SCHEDULE["jobs-sync"]
    assert entry == {"task": "portal.jobs_sync", "schedule": 15.0}
