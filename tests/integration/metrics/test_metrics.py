"""``GET /metrics``, scraped by a real Prometheus from a live server, the figures asserted
through Prometheus's query API.

The worker-side figures (task outcomes, reconcile runs and durations) come from the real
Celery worker of the session, which reconciles onto the API emulator and records them
in Redis; the database figures (lag, jobs per phase, pending requests, idle flags) from
rows the test writes. The sample alert rules pass ``promtool check rules``, and every
``portal_*`` series the rules and the Grafana dashboard use is one /metrics serves.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from datetime import timedelta
from urllib.parse import urlparse

import pytest
import requests
from django.contrib.auth import get_user_model
from django.db.models import F
from django.utils import timezone

from portal.celery import app
from portal.metrics import store
from portal.models import Cluster, IdleFlag, Job, ManagedObject, QuotaGrant, QuotaRequest
from portal.tasks import reconcile_cluster_task
from tests.integration.jobs.conftest import build_world
from tests.integration.metrics.scraper import JOB, scraping
from tests.services import REPO_ROOT, unavailable

pytestmark = pytest.mark.usefixtures("celery_worker_process")

TOKEN = "scrape-token-0123456789"
RULES = REPO_ROOT / "deploy" / "prometheus" / "gpu-quota-portal-rules.yaml"
RULES_TESTS = RULES.with_name("gpu-quota-portal-rules.test.yaml")
DASHBOARD = REPO_ROOT / "deploy" / "grafana" / "gpu-quota-portal-dashboard.json"


@pytest.fixture
def metrics_world(transactional_db, kube_emulator, live_server, settings):
    """The jobs world, the scrape token set and the workers' metrics store emptied."""
    settings.METRICS_TOKEN = TOKEN
    store.clear()
    world = build_world()
    world["server"] = kube_emulator
    world["url"] = live_server.url
    yield world
    store.clear()


def converge(cluster: Cluster, timeout: float = 60.0) -> dict:
    """Reconcile ``cluster`` through the worker; the task's return value."""
    return reconcile_cluster_task.delay(cluster.pk).get(timeout=timeout)


def make_job(world, name: str, phase: str, team="team_a") -> Job:
    return Job.objects.create(team=world[team], submitter=world["member_a"], name=name,
                              image="ghcr.io/acme/train:1", command=["python"], workers=1,
                              gpus_per_worker=2, flavor=world["h100"], phase=phase)


def test_metrics_need_the_token_or_a_staff_session(metrics_world):
    url = f"{metrics_world['url']}/metrics"
    assert requests.get(url, timeout=60).status_code == 401
    assert requests.get(url, headers={"Authorization": "Bearer wrong"},
                        timeout=60).status_code == 401
    response = requests.get(url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60)
    assert response.status_code == 200
    assert response.headers["Content-Type"].startswith("text/plain; version=")
    assert 'portal_reconcile_lag_generations{cluster="gpu-east"} 1.0' in response.text

    def session(username, password):
        s = requests.Session()
        login = s.get(f"{metrics_world['url']}/accounts/login/", timeout=60)
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', login.text).group(1)
        s.post(f"{metrics_world['url']}/accounts/login/", timeout=60,
               data={"username": username, "password": password,
                     "csrfmiddlewaretoken": token},
               headers={"Referer": f"{metrics_world['url']}/accounts/login/"})
        return s

    assert session("staff", "pw-staff-123").get(url, timeout=60).status_code == 200
    assert session("member_a", "pw-member_a-123").get(url, timeout=60).status_code == 403


def test_prometheus_scrapes_the_portal_figures(metrics_world):
    world = metrics_world
    cluster, server = world["cluster"], world["server"]
    users = get_user_model().objects

    # A first reconcile through the real worker: converged, objects on the emulator.
    first = converge(cluster)
    assert first["failed"] == 0 and first["writes"] > 0
    # A second one with team-a's ClusterQueue refused by the API server (422).
    server.faults.add("PATCH", r"/apis/kueue\.x-k8s\.io/[^/]+/clusterqueues/team-a$", 422,
                      count=None, message="admission webhook denied the request")
    QuotaGrant.objects.filter(team=world["team_a"]).update(nominal_gpus=20)
    Cluster.objects.filter(pk=cluster.pk).update(spec_generation=F("spec_generation") + 1)
    second = converge(cluster)
    assert second["failed"] == 1
    server.faults.clear()
    # A task that fails, and one that succeeds, by name.
    failed = app.send_task("portal.reconcile_cluster", args=["not-a-cluster-id"])
    failed.get(timeout=30, propagate=False)
    assert failed.state == "FAILURE"
    app.send_task("portal.worker_health").get(timeout=30)
    # Intent the worker has not applied yet: two generations of lag.
    Cluster.objects.filter(pk=cluster.pk).update(spec_generation=F("spec_generation") + 2)
    cluster.refresh_from_db()
    lag = cluster.spec_generation - cluster.applied_generation
    assert lag >= 2

    # Jobs in phases, quota requests, idle flags.
    for i, phase in enumerate(["Queued", "Queued", "Running", "Succeeded", "Failed"]):
        make_job(world, f"job-{i}", phase)
    notebook = make_job(world, "notebook", "Running")
    inference = make_job(world, "inference", "Running", team="team_b")
    old = make_job(world, "old", "Succeeded")
    now = timezone.now()
    flag = {"activity": 0.01, "threshold": 0.05, "window_hours": 24,
            "idle_since": now - timedelta(hours=30), "flagged_at": now - timedelta(hours=6),
            "reclaimable_at": now + timedelta(hours=18)}
    IdleFlag.objects.create(job=notebook, state="open", gpus=4, **flag)
    IdleFlag.objects.create(job=inference, state="snoozed", gpus=2, **flag)
    IdleFlag.objects.create(job=old, state="cleared", gpus=8, **flag)
    lead = users.get(username="lead_a")
    for state in ("pending", "pending", "approved"):
        request = QuotaRequest.objects.create(team=world["team_a"], flavor=world["h100"],
                                              requested_by=lead, nominal_gpus=24,
                                              justification="more", state=state)
    QuotaRequest.objects.filter(pk=request.pk - 2).update(created_at=now - timedelta(hours=3))
    failed_objects = ManagedObject.objects.filter(cluster=cluster).exclude(last_error="")
    assert failed_objects.count() == 1

    target = urlparse(world["url"]).netloc
    with scraping(target, TOKEN) as prom:
        c = '{cluster="gpu-east"}'
        prom.eventually(f"portal_reconcile_lag_generations{c}", lag)
        assert prom.value(f"portal_cluster_spec_generation{c}") == cluster.spec_generation
        assert prom.value(f"portal_cluster_applied_generation{c}") == cluster.applied_generation
        assert prom.value(f"portal_cluster_last_reconcile_timestamp_seconds{c}") == \
            pytest.approx(cluster.last_reconciled_at.timestamp())
        # Reconcile runs, failures and durations, as the worker recorded them.
        runs = 'portal_reconcile_runs_total{cluster="gpu-east",outcome="%s"}'
        assert prom.value(runs % "ok") == 1
        assert prom.value(runs % "failed_objects") == 1
        assert prom.value(f"portal_reconcile_failed_objects_total{c}") == 1
        assert prom.value(f"portal_reconcile_writes_total{c}") == \
            first["writes"] + second["writes"]
        assert prom.value(f"portal_reconcile_duration_seconds_count{c}") == 2
        assert prom.value(f"portal_reconcile_duration_seconds_sum{c}") > 0
        assert prom.value('portal_reconcile_duration_seconds_bucket'
                          '{cluster="gpu-east",le="+Inf"}') == 2
        assert prom.value('portal_managed_objects{cluster="gpu-east",state="failed"}') == 1
        assert prom.value('portal_managed_objects{cluster="gpu-east",state="ok"}') == \
            ManagedObject.objects.filter(cluster=cluster, last_error="").count()
        # Celery task outcomes.
        tasks = 'portal_celery_tasks_total{task="%s",outcome="%s"}'
        assert prom.value(tasks % ("portal.reconcile_cluster", "success")) == 2
        assert prom.value(tasks % ("portal.reconcile_cluster", "failure")) == 1
        assert prom.value(tasks % ("portal.worker_health", "success")) == 1
        assert prom.value('portal_celery_task_duration_seconds_count'
                          '{task="portal.reconcile_cluster"}') == 3
        assert prom.value("portal_metrics_store_up") == 1
        # Jobs per phase (zeros included), pending requests, idle flags.
        phase = 'portal_jobs{cluster="gpu-east",phase="%s"}'
        expected = {"Submitted": 0, "Queued": 2, "Admitted": 0, "Running": 3, "Succeeded": 2,
                    "Failed": 1, "Cancelled": 0}
        for name, count in expected.items():
            assert prom.value(phase % name) == count, name
        assert prom.value("sum(portal_jobs)") == Job.objects.count()
        assert prom.value(f"portal_quota_requests_pending{c}") == 2
        assert prom.value(f"portal_quota_request_oldest_pending_age_seconds{c}") == \
            pytest.approx(3 * 3600, abs=120)
        assert prom.value('portal_idle_flags{cluster="gpu-east",state="open"}') == 1
        assert prom.value('portal_idle_flags{cluster="gpu-east",state="snoozed"}') == 1
        assert prom.value(f"portal_idle_flagged_gpus{c}") == 6

        # Later changes show in the next scrapes: a reconcile catches up, a request is
        # reviewed.
        QuotaRequest.objects.filter(state="pending").update(state="rejected")
        converge(cluster)
        cluster.refresh_from_db()
        prom.eventually(f"portal_reconcile_lag_generations{c}", 0)
        prom.eventually(f"portal_quota_requests_pending{c}", 0)
        assert prom.value(f"portal_quota_request_oldest_pending_age_seconds{c}") is None
        prom.eventually(runs % "ok", 2)
        assert prom.target()["health"] == "up"


def test_the_sample_alert_rules_pass_promtool_check_and_their_unit_tests():
    promtool = shutil.which("promtool")
    if promtool is None:
        unavailable("promtool is not installed (Debian's prometheus package has it)")
    proc = subprocess.run([promtool, "check", "rules", str(RULES)], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "SUCCESS: 10 rules found" in proc.stdout
    # The rules' own unit tests: alerts fire (and stay quiet) on synthetic series.
    proc = subprocess.run([promtool, "test", "rules", RULES_TESTS.name], capture_output=True,
                          text=True, timeout=60, cwd=RULES_TESTS.parent)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "SUCCESS" in proc.stdout


def exported_names(text: str) -> set[str]:
    """Sample names of an exposition (``# TYPE x histogram`` -> x_bucket, x_sum, x_count)."""
    names = set()
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split()
            names |= ({f"{name}_bucket", f"{name}_sum", f"{name}_count"} if kind == "histogram"
                      else {name if name.endswith("_total") else f"{name}_total"}
                      if kind == "counter" else {name})
    return names


def test_rules_and_dashboard_use_only_exported_series(metrics_world):
    text = requests.get(f"{metrics_world['url']}/metrics", timeout=60,
                        headers={"Authorization": f"Bearer {TOKEN}"}).text
    exported = exported_names(text)
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    exprs.append(dashboard["templating"]["list"][1]["query"]["query"])
    used = set(re.findall(r"\bportal_[a-z_]+", RULES.read_text() + "\n".join(exprs)))
    assert used, "no portal_* series in the rules and the dashboard"
    assert used <= exported, f"not served by /metrics: {sorted(used - exported)}"
    assert f'job="{JOB}"' in RULES.read_text()
