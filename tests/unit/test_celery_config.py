"""The Celery app is configured for at-least-once, idempotent tasks."""

from portal.celery import RETRY_POLICY, app


def test_tasks_are_acknowledged_late_and_requeued_when_the_worker_dies():
    assert app.conf.task_acks_late is True
    assert app.conf.task_reject_on_worker_lost is True
    assert app.conf.worker_prefetch_multiplier == 1


def test_tasks_use_json_only():
    assert app.conf.accept_content == ["json"]
    assert app.conf.task_serializer == "json"


def test_every_portal_task_has_an_explicit_portal_name():
    import portal.tasks  # noqa: F401 - registers the tasks

    names = [name for name in app.tasks if not name.startswith("celery.")]
    assert "portal.worker_health" in names
    assert all(name.startswith("portal.") for name in names), names


def test_retry_policy_backs_off_with_jitter():
    assert RETRY_POLICY["retry_backoff"] == 2
    assert RETRY_POLICY["retry_jitter"] is True
    assert RETRY_POLICY["max_retries"] == 8
