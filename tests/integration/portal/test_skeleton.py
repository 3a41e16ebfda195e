"""The walking skeleton on real services: PostgreSQL, Redis, a real Celery worker."""

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import override_settings

from portal.tasks import worker_health


@pytest.mark.django_db
def test_user_round_trip_on_postgresql():
    assert connection.vendor == "postgresql"
    user_model = get_user_model()
    user_model.objects.create_user("carol", email="carol@example.com", password="s3cret-pass")
    loaded = user_model.objects.get(username="carol")
    assert loaded.email == "carol@example.com"
    assert loaded.check_password("s3cret-pass")
    assert not loaded.check_password("wrong")


@pytest.mark.django_db
def test_healthz_reports_database_broker_and_pages(client):
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok", "checks": {
        "database": "ok", "broker": "ok", "pages": "ok"}}


@pytest.mark.django_db
def test_healthz_is_503_when_the_broker_is_down_and_names_no_vendor(client, caplog):
    from portal.celery import app

    previous = app.conf.broker_url
    app.conf.broker_url = "redis://127.0.0.1:1/0"  # nothing listens on port 1
    try:
        with override_settings(CELERY_BROKER_URL="redis://127.0.0.1:1/0"):
            response = client.get("/healthz")
    finally:
        app.conf.broker_url = previous
    assert response.status_code == 503
    assert response.json() == {"status": "degraded", "checks": {
        "database": "ok", "broker": "down", "pages": "ok"}}
    # No login is needed for /healthz: its body names no vendor, host or port;
    # the error goes to the log.
    body = response.content.decode().lower()
    for word in ("redis", "postgres", "sqlite", "127.0.0.1", "6379", "5432"):
        assert word not in body
    assert any("broker check failed" in r.getMessage() for r in caplog.records)


@pytest.mark.django_db(transaction=True)
def test_a_real_worker_runs_a_task_through_redis(celery_worker_process):
    result = worker_health.delay()
    payload = result.get(timeout=30)
    assert result.successful()
    assert payload["database"]["ok"] is True
    assert payload["database"]["vendor"] == "postgresql"
    # The worker used the very test database this session created.
    assert payload["database_name"] == connection.settings_dict["NAME"]
    assert payload["database_name"].startswith("test_")
