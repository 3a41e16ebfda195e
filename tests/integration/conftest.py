"""Integration tier: real PostgreSQL, real Redis and a real Celery worker."""

import os
import subprocess
import sys
import time
import uuid
from urllib.parse import urlparse

import pytest
from django.conf import settings
from rest_framework.test import APIClient

from tests.services import REPO_ROOT, require, unavailable


@pytest.fixture(scope="session", autouse=True)
def _real_services() -> None:
    """The integration tier runs on PostgreSQL and Redis, never on stand-ins."""
    if settings.DATABASES["default"]["ENGINE"] != "django.db.backends.postgresql":
        unavailable("integration tests need DATABASE_URL at PostgreSQL (make test sets it)")
    require("PostgreSQL", "127.0.0.1", 5432)
    if not settings.CELERY_BROKER_URL.startswith("redis://"):
        unavailable("integration tests need REDIS_URL pointing at Redis (make test sets it)")
    broker = urlparse(settings.CELERY_BROKER_URL)
    require("Redis", broker.hostname or "127.0.0.1", broker.port or 6379)


@pytest.fixture(scope="session")
def kubeconfig_path(tmp_path_factory):
    """Where the session's kubeconfig lives (written by ``kube_emulator`` when used).

    The worker gets it as ``KUBECONFIG`` from the start, so it reaches the
    emulator whichever test starts the worker first.
    """
    return tmp_path_factory.mktemp("kube") / "config"


@pytest.fixture(scope="session")
def _kube_emulator_server(kubeconfig_path):
    from queues.sim.apiserver import EmulatorServer, default_crd_dir

    crd_dir = default_crd_dir()
    if not crd_dir.is_dir():
        unavailable(f"CRD folder {crd_dir} not found (expected at <repo>/../shared/crds)")
    with EmulatorServer(crd_dir=crd_dir) as server:
        server.write_kubeconfig(kubeconfig_path)
        yield server


@pytest.fixture
def kube_emulator(_kube_emulator_server, kubeconfig_path, settings):
    """The Kubernetes API emulator over loopback HTTP, emptied, faults cleared, counters zero.

    ``settings.KUBECONFIG`` points at it for the test process; the worker
    started by ``celery_worker_process`` has the same path in its environment.
    """
    server = _kube_emulator_server
    server.reset()
    server.faults.clear()
    server.counters.reset()
    settings.KUBECONFIG = str(kubeconfig_path)
    settings.KUBE_CONTEXT = ""
    yield server
    server.faults.clear()


@pytest.fixture(scope="session")
def celery_worker_process(django_db_setup, django_db_blocker, kubeconfig_path,
                          tmp_path_factory):
    """A real ``celery worker`` process consuming a private queue from Redis.

    It runs against the test database that pytest-django created, so tasks see
    rows that ``transactional_db`` tests committed. Yields the queue name; the
    test process publishes there (``task_default_queue`` is switched for the
    session). The worker is stopped at the end of the session. Its log goes to
    ``worker.log`` in a session temp folder (a pipe nobody reads would fill up
    after ~64 KiB of log and block the worker mid-task).
    """
    from portal.celery import app

    queue = f"test-{uuid.uuid4().hex[:8]}"
    db = settings.DATABASES["default"]
    env = dict(os.environ)
    env["DATABASE_URL"] = (
        f"postgres://{db['USER']}:{db['PASSWORD']}@{db['HOST']}:{db['PORT']}/{db['NAME']}"
    )
    env["CELERY_TASK_DEFAULT_QUEUE"] = queue
    env["KUBECONFIG"] = str(kubeconfig_path)
    env.pop("KUBE_CONTEXT", None)
    log_path = tmp_path_factory.mktemp("worker") / "worker.log"
    log = log_path.open("w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "portal", "worker", "--pool=solo",
         "--loglevel=INFO", "-Q", queue, "--without-gossip", "--without-mingle",
         "--without-heartbeat", f"--hostname={queue}@%h"],
        cwd=REPO_ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, text=True,
    )
    previous = app.conf.task_default_queue
    app.conf.task_default_queue = queue
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                pytest.fail(f"celery worker exited early:\n{log_path.read_text()}")
            replies = app.control.ping(destination=[f"{queue}@{os.uname().nodename}"], timeout=1)
            if replies:
                break
        else:
            pytest.fail("celery worker did not answer a ping within 60 s")
        yield queue
    finally:
        app.conf.task_default_queue = previous
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


@pytest.fixture(scope="session")
def prometheus():
    """A real ``prometheus`` (Debian's package) on a free loopback port, scraping a
    loopback DCGM-format endpoint every second (see :mod:`tests.integration.prometheus`).

    Yields a :class:`tests.integration.prometheus.PrometheusServer`; its ``endpoint``
    serves :data:`tests.integration.prometheus.DCGM_TEXT`. Fails with ``CI=true`` (skips
    elsewhere) when ``prometheus`` is not installed.
    """
    from tests.integration.prometheus import DcgmEndpoint, start_prometheus

    with DcgmEndpoint() as endpoint, start_prometheus(endpoint) as server:
        yield server


@pytest.fixture
def api():
    """``api(user)`` -> an APIClient authenticated as ``user`` (``None``: anonymous)."""

    def make(user=None) -> APIClient:
        client = APIClient()
        if user is not None:
            client.force_authenticate(user)
        return client

    return make
