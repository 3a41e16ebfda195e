"""A small Kueue world for reconcile tests, with the emulator as its cluster.

One cluster, an H100 flavor, a cohort ``research`` with ``team-a`` (16 GPUs)
and ``team-b`` (8 GPUs, borrowing limit 4); users ``staff`` and ``lead_a``.
"""

import os
import signal
import subprocess
import sys
import time
import uuid
from decimal import Decimal
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model

from portal.models import Cluster, Cohort, GpuFlavor, Membership, QuotaGrant, Team
from tests.services import REPO_ROOT


@pytest.fixture
def world(transactional_db, kube_emulator):
    """Create the world; return a dict of its rows, users and the emulator (``server``)."""
    users = get_user_model().objects
    staff = users.create_user("staff", password="pw-staff-123", is_staff=True)
    lead_a = users.create_user("lead_a", password="pw-lead-a-123")
    cluster = Cluster.objects.create(name="gpu-east", backend="kueue")
    h100 = GpuFlavor.objects.create(
        cluster=cluster, name="h100", gpu_resource="nvidia.com/gpu", gpu_model="H100",
        physical_gpus=64, cpu_per_gpu="12", memory_per_gpu="96Gi",
        node_labels={"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
    )
    cohort = Cohort.objects.create(cluster=cluster, name="research", weight=Decimal("1"))
    team_a = Team.objects.create(slug="team-a", name="Team A", cluster=cluster, cohort=cohort)
    team_b = Team.objects.create(slug="team-b", name="Team B", cluster=cluster, cohort=cohort)
    QuotaGrant.objects.create(team=team_a, flavor=h100, nominal_gpus=16)
    QuotaGrant.objects.create(team=team_b, flavor=h100, nominal_gpus=8, borrowing_limit_gpus=4)
    Membership.objects.create(user=lead_a, team=team_a, role="lead")
    return {"staff": staff, "lead_a": lead_a, "cluster": cluster, "h100": h100,
            "cohort": cohort, "team_a": team_a, "team_b": team_b, "server": kube_emulator}


@pytest.fixture
def converged():
    """``converged(cluster, timeout=30)``: wait until the worker applied its spec generation."""

    def wait(cluster: Cluster, timeout: float = 30.0) -> Cluster:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            cluster.refresh_from_db()
            if (cluster.applied_generation >= cluster.spec_generation
                    and cluster.last_reconciled_at is not None):
                return cluster
            time.sleep(0.1)
        pytest.fail(f"cluster {cluster.name} did not converge: applied "
                    f"{cluster.applied_generation} < spec {cluster.spec_generation}; "
                    f"last error: {cluster.last_error!r}")

    return wait


class Worker:
    """A ``celery worker`` process started by :func:`start_worker`; ``kill()`` sends SIGKILL."""

    def __init__(self, proc: subprocess.Popen, hostname: str, log_path: Path) -> None:
        self.proc, self.hostname, self.log_path = proc, hostname, log_path

    def kill(self) -> None:
        """SIGKILL the worker (no cleanup, no ack: as if the machine died) and reap it."""
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)

    def stop(self) -> None:
        """SIGTERM (warm shutdown), SIGKILL after 20 s."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)

    def log(self) -> str:
        """What the worker printed so far."""
        return self.log_path.read_text(errors="replace")


@pytest.fixture
def start_worker(django_db_setup, kubeconfig_path, tmp_path):
    """``start_worker(**env) -> Worker``: real ``celery worker`` processes on a private queue.

    Unlike the session's ``celery_worker_process``, these belong to one test:
    it can start several (concurrency), kill one with SIGKILL and start
    another, or give them settings through the environment (e.g.
    ``KUBE_REQUEST_TIMEOUT="2"``). Tasks published by the test
    (``.delay()``) go to that queue; every worker still running is stopped
    at the end of the test.
    """
    from portal.celery import app

    queue = f"rf-{uuid.uuid4().hex[:8]}"
    db = settings.DATABASES["default"]
    workers: list[Worker] = []
    previous = app.conf.task_default_queue
    app.conf.task_default_queue = queue

    def start(**extra_env: str) -> Worker:
        env = dict(os.environ)
        env["DATABASE_URL"] = (
            f"postgres://{db['USER']}:{db['PASSWORD']}@{db['HOST']}:{db['PORT']}/{db['NAME']}"
        )
        env["CELERY_TASK_DEFAULT_QUEUE"] = queue
        env["KUBECONFIG"] = str(kubeconfig_path)
        env.pop("KUBE_CONTEXT", None)
        env.update(extra_env)
        name = f"{queue}-{len(workers)}"
        log_path = tmp_path / f"{name}.log"
        with log_path.open("w") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", "celery", "-A", "portal", "worker", "--pool=solo",
                 "--loglevel=INFO", "-Q", queue, "--without-gossip", "--without-mingle",
                 "--without-heartbeat", f"--hostname={name}@%h"],
                cwd=REPO_ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
            )
        worker = Worker(proc, f"{name}@{os.uname().nodename}", log_path)
        workers.append(worker)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                pytest.fail(f"celery worker exited early:\n{worker.log()}")
            if app.control.ping(destination=[worker.hostname], timeout=1):
                return worker
        pytest.fail(f"celery worker did not answer a ping within 60 s:\n{worker.log()}")

    try:
        yield start
    finally:
        app.conf.task_default_queue = previous
        for worker in workers:
            worker.stop()
