"""``LOG_FORMAT=json`` in a real worker: every log line is a JSON object, and the lines
logged while a task runs carry its task id, its name and its cluster (for reconcile:
the cluster's, for job tasks: the job's). The web side echoes the request id."""

import json

import pytest
from django.test import Client

from portal.models import Job
from portal.tasks import reconcile_cluster_task
from tests.integration.helpers import api_as, wait_for_job
from tests.integration.jobs.conftest import build_world, job_payload


@pytest.fixture
def json_world(transactional_db, kube_emulator):
    return build_world()


def test_worker_lines_are_json_with_task_id_and_cluster(json_world, start_worker):
    worker = start_worker(LOG_FORMAT="json", LOG_LEVEL="INFO")
    reconcile = reconcile_cluster_task.delay(json_world["cluster"].pk)
    assert reconcile.get(timeout=90)["failed"] == 0
    response = api_as(json_world["member_a"]).post("/api/v1/jobs/", job_payload(name="logged"),
                                                   format="json")
    assert response.status_code == 201, response.json()
    job_id = response.json()["id"]
    wait_for_job(job_id, lambda j: j.cluster_uid, "created on the cluster", timeout=90)
    worker.stop()

    text = worker.log()
    records = []
    for line in text.splitlines():
        if line.startswith("{"):
            records.append(json.loads(line))
    assert records, text[-3000:]
    # Celery's own lines go through the same formatter.
    received = [r for r in records if "received" in r["message"]]
    assert received and all(r["logger"].startswith("celery") for r in received)

    def task_line(name):
        lines = [r for r in records if r["logger"] == "portal.task" and r["task"] == name]
        assert lines, f"no portal.task line for {name}:\n{text[-3000:]}"
        return lines[0]

    line = task_line("portal.reconcile_cluster")
    assert line["task_id"] == reconcile.id
    assert line["cluster"] == "gpu-east"
    assert line["state"] == "SUCCESS" and line["duration_s"] >= 0
    assert line["level"] == "INFO" and line["ts"].endswith("Z")
    create = task_line("portal.job_create")
    assert create["cluster"] == "gpu-east" and create["state"] == "SUCCESS"
    assert Job.objects.get(pk=job_id).cluster_uid
    # Outside a task, no task context.
    ready = [r for r in records if "ready" in r["message"]]
    assert ready and "task_id" not in ready[0]
    # Nothing but the startup banner is left as plain text.
    plain = [line for line in text.splitlines() if line.strip() and not line.startswith("{")]
    assert not [line for line in plain if " INFO " in line or " WARNING " in line], plain


def test_every_response_carries_a_request_id(db):
    response = Client().get("/healthz", HTTP_X_REQUEST_ID="probe-1")
    assert response["X-Request-ID"] == "probe-1"
    assert len(Client().get("/healthz")["X-Request-ID"]) == 32
