"""Helpers shared by integration tests (plain functions; fixtures live in conftest.py)."""

import threading
import time

import pytest
from django.db import connection
from rest_framework.test import APIClient

from portal.models import Job


def together(calls):
    """Run each callable in its own thread (own connection), released at once."""
    barrier = threading.Barrier(len(calls))
    results = [None] * len(calls)

    def run(index, call):
        try:
            barrier.wait()
            results[index] = call()
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(i, c)) for i, c in enumerate(calls)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return results


def api_as(user) -> APIClient:
    """An APIClient authenticated as ``user``."""
    client = APIClient()
    client.force_authenticate(user)
    return client


def wait_for_job(job_id: int, predicate, what: str, timeout: float = 45.0) -> Job:
    """Poll the job row until ``predicate(job)`` holds (the worker writes it)."""
    deadline = time.monotonic() + timeout
    job = None
    while time.monotonic() < deadline:
        job = Job.objects.get(pk=job_id)
        if predicate(job):
            return job
        time.sleep(0.1)
    pytest.fail(f"job {job_id} never reached {what}: phase={job.phase} reason={job.reason} "
                f"message={job.message!r} last_error={job.last_error!r}")


def live_job(port, job: Job) -> dict | None:
    """The job's object as the cluster (``port``) has it, or ``None``."""
    meta = job.manifest["metadata"]
    return port.get(job.manifest["apiVersion"], job.manifest["kind"], meta["name"],
                    meta["namespace"])
