"""``gpuq`` drives jobs from submit to finish against a live test server.

The CLI runs as its own process (``python -m portal_cli``, what the ``gpuq`` console
script calls) with ``GPUQ_URL``/``GPUQ_TOKEN``, talking HTTP to pytest-django's live
server; a real Celery worker creates, syncs and cancels the jobs on the Kubernetes API
emulator, and the test writes what Kueue's controllers would (``queues.sim.kueue_objects``),
as tests/integration/jobs/test_job_flow.py does.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib.metadata import entry_points
from io import StringIO

import pytest
import yaml
from django.conf import settings
from django.core.management import call_command

from portal.services.reconcile import cluster_reconcile
from queues.cluster import KubernetesCluster
from queues.sim import kueue_objects as kueue
from tests.integration.helpers import live_job, wait_for_job
from tests.integration.jobs.conftest import build_world
from tests.services import REPO_ROOT

pytestmark = pytest.mark.usefixtures("celery_worker_process")

OK, FAILED, USAGE, REFUSED, UNAUTHENTICATED, UNAVAILABLE, TIMEOUT, CANCELLED = range(8)


def token_of(username: str) -> str:
    out = StringIO()
    call_command("create_api_token", username, stdout=out)
    return out.getvalue().strip()


@pytest.fixture
def cli_world(transactional_db, kube_emulator, live_server, tmp_path):
    world = build_world()
    result = cluster_reconcile(cluster_id=world["cluster"].pk)
    assert result is not None and not result.failed
    world["port"] = KubernetesCluster(kubeconfig=settings.KUBECONFIG)
    world["url"] = live_server.url
    world["tmp"] = tmp_path
    world["tokens"] = {name: token_of(name) for name in ("member_a", "lead_a")}
    return world


def gpuq(world, *args: str, user: str | None = "member_a", env: dict | None = None,
         background: bool = False, stdin: str | None = None):
    """Run ``python -m portal_cli *args``; ``(exit code, stdout, stderr)`` (or the Popen)."""
    environment = {"PATH": os.environ["PATH"], "HOME": str(world["tmp"]),
                   "XDG_CONFIG_HOME": str(world["tmp"] / "config"), "GPUQ_URL": world["url"]}
    if user:
        environment["GPUQ_TOKEN"] = world["tokens"][user]
    environment.update(env or {})
    command = [sys.executable, "-m", "portal_cli", *args]
    if background:
        return subprocess.Popen(command, cwd=REPO_ROOT, env=environment, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc = subprocess.run(command, cwd=REPO_ROOT, env=environment, text=True, input=stdin,
                          capture_output=True, timeout=180)
    return proc.returncode, proc.stdout, proc.stderr


def created(job_id: int):
    return wait_for_job(job_id, lambda j: j.cluster_uid and j.status_synced_at, "created",
                        timeout=90)


def test_console_script_is_installed_as_gpuq():
    [script] = [e for e in entry_points(group="console_scripts") if e.name == "gpuq"]
    assert script.value == "portal_cli.main:main"


def test_a_job_from_submit_to_succeeded(cli_world):
    world, port = cli_world, cli_world["port"]
    job_file = world["tmp"] / "job.yaml"
    job_file.write_text(yaml.safe_dump({
        "team": "team-a", "name": "cli-train", "image": "ghcr.io/acme/train:1.4",
        "command": ["torchrun", "train.py"], "args": ["--epochs", "3"], "workers": 2,
        "gpus": 4, "flavor": "h100", "env": {"WANDB_PROJECT": "llm"},
    }))

    code, out, err = gpuq(world, "--output", "json", "submit", "-f", str(job_file),
                          "--env", "SEED=7")
    assert code == OK, err
    job = json.loads(out)
    job_id = job["id"]
    assert (job["phase"], job["name"], job["workers"], job["gpus_per_worker"],
            job["total_gpus"]) == ("Submitted", "cli-train", 2, 4, 8)
    assert {"name": "SEED", "value": "7"} in job["env"]
    assert {"name": "WANDB_PROJECT", "value": "llm"} in job["env"]

    # The worker creates it on the cluster; Kueue (played here) makes it wait for quota.
    live = live_job(port, created(job_id))
    workload = kueue.create_workload(port, live)
    kueue.set_pending(port, workload, reason="Pending",
                      message=kueue.insufficient_quota_message("nvidia.com/gpu", "h100", 8))
    code, out, err = gpuq(world, "why", str(job_id), "--refresh")
    assert code == OK, err
    assert f"job {job_id} is Queued: WaitingForQuota" in out
    assert "8 more nvidia.com/gpu on flavor h100" in out
    assert "estimated start: not available" in out
    code, out, _ = gpuq(world, "why", str(job_id), "-o", "json")
    why = json.loads(out)
    assert (why["phase"], why["reason"], why["waiting"]) == ("Queued", "WaitingForQuota", True)
    assert why["estimated_start"] is None
    assert any(e["type"] == "QuotaReserved" for e in why["recent_events"])

    code, out, _ = gpuq(world, "list", "--team", "team-a")
    assert code == OK
    header, *rows = out.splitlines()
    assert header.split()[:4] == ["ID", "TEAM", "NAME", "PHASE"]
    assert any(r.split()[:4] == [str(job_id), "team-a", "cli-train", "Queued"] for r in rows)
    code, out, _ = gpuq(world, "list", "--phase", "Queued", "-o", "json")
    assert [j["id"] for j in json.loads(out)] == [job_id]

    # Admitted and running.
    kueue.admit(port, workload, cluster_queue="team-a", flavor="h100")
    kueue.unsuspend_job(port, live)
    kueue.set_job_status(port, live, active=2, ready=2)
    kueue.set_pods_ready(port, workload)
    code, out, err = gpuq(world, "status", str(job_id), "--refresh")
    assert code == OK, err
    assert out.startswith(f"job {job_id} team-a/cli-train: Running")
    assert "2 x 4 h100 GPU(s) = 8" in out

    # `gpuq wait` follows it until it finishes; its exit code is the outcome.
    waiter = gpuq(world, "wait", str(job_id), "--refresh", "--interval", "0.5",
                  "--timeout", "150", background=True)
    try:
        first = waiter.stderr.readline()  # it has read the job once: Running
        assert first.startswith(f"job {job_id}: Running"), first
        kueue.set_job_status(port, live, active=0, ready=0, succeeded=2, complete=True)
        kueue.finish(port, workload, succeeded=True)
        out, err = waiter.communicate(timeout=170)
    finally:
        if waiter.poll() is None:
            waiter.kill()
    assert waiter.returncode == OK, err
    assert f"job {job_id} team-a/cli-train: Succeeded" in out
    assert f"job {job_id}: Succeeded" in err  # each phase it saw, on stderr
    code, out, _ = gpuq(world, "status", str(job_id), "-o", "json")
    assert json.loads(out)["phase"] == "Succeeded"


def test_submit_from_flags_cancel_and_wait_says_cancelled(cli_world):
    world, port = cli_world, cli_world["port"]
    code, out, err = gpuq(world, "submit", "--team", "team-a", "--name", "cli-cancel",
                          "--image", "ghcr.io/acme/notebook:2", "--flavor", "h100",
                          "--gpus", "1", "--", "sleep", "infinity")
    assert code == OK, err
    assert out.startswith("submitted job ") and out.strip().endswith("team-a/cli-cancel: Submitted")
    job_id = int(out.split()[2])
    live = live_job(port, created(job_id))
    assert live["spec"]["template"]["spec"]["containers"][0]["command"] == ["sleep", "infinity"]
    kueue.create_workload(port, live)

    code, out, err = gpuq(world, "cancel", str(job_id))
    assert code == OK, err
    assert f"cancelling job {job_id} team-a/cli-cancel" in out
    code, out, err = gpuq(world, "wait", str(job_id), "--interval", "0.5", "--timeout", "120")
    assert code == CANCELLED, err
    assert "Cancelled" in out
    # Cancelling again is refused by the portal: exit 3 with its message.
    code, _, err = gpuq(world, "cancel", str(job_id))
    assert code == REFUSED and "gpuq: 400" in err


def test_quota_request_usage_and_the_exit_codes(cli_world):
    world = cli_world
    code, out, err = gpuq(world, "quota", "request", "--team", "team-a", "--flavor", "h100",
                          "--gpus", "24", "-j", "a bigger run", "-o", "json", user="lead_a")
    assert code == OK, err
    request = json.loads(out)
    assert (request["team"], request["nominal_gpus"], request["state"]) == ("team-a", 24,
                                                                          "pending")
    code, out, _ = gpuq(world, "quota", "list", "--state", "pending", user="lead_a")
    assert code == OK and str(request["id"]) in out and "pending" in out
    # A member may not ask for quota: 403 -> exit 3, the portal's message on stderr.
    code, out, err = gpuq(world, "quota", "request", "--team", "team-a", "--flavor", "h100",
                          "--gpus", "24", "-j", "please")
    assert code == REFUSED and "gpuq: 403" in err

    code, out, err = gpuq(world, "usage", "--team", "team-a", "-o", "json")
    assert code == OK, err
    assert [t["slug"] for t in json.loads(out)["teams"]] == ["team-a"]
    code, out, _ = gpuq(world, "usage")
    assert code == OK and "team-a" in out and "GPU-H" in out

    # An invalid job: the field's message, exit 3.
    code, out, err = gpuq(world, "submit", "--team", "team-a", "--name", "Bad_Name",
                          "--image", "i", "--flavor", "h100", "--", "true")
    assert code == REFUSED and "name" in err
    # A job file with an unknown key: a usage error, exit 2, nothing sent.
    bad = world["tmp"] / "bad.yaml"
    bad.write_text("team: team-a\nnmae: typo\n")
    code, _, err = gpuq(world, "submit", "-f", str(bad))
    assert code == USAGE and "unknown key(s) nmae" in err
    # A job from stdin.
    code, out, err = gpuq(world, "submit", "-f", "-", "-o", "json", stdin=yaml.safe_dump({
        "team": "team-a", "name": "from-stdin", "image": "i:1", "command": "true",
        "flavor": "h100"}))
    assert code == OK, err
    waiting = json.loads(out)
    assert waiting["command"] == ["true"]
    # Unknown job: 404 -> 3; with -o json the error is JSON on stdout too.
    code, out, err = gpuq(world, "status", "999999", "-o", "json")
    assert code == REFUSED and json.loads(out)["status"] == 404
    # No token, a wrong token: 4. The portal away: 5.
    code, _, err = gpuq(world, "list", user=None)
    assert code == UNAUTHENTICATED and "no API token" in err
    code, _, err = gpuq(world, "list", user=None, env={"GPUQ_TOKEN": "not-a-token"})
    assert code == UNAUTHENTICATED and "401" in err
    code, _, err = gpuq(world, "list", env={"GPUQ_URL": "http://127.0.0.1:9"})
    assert code == UNAVAILABLE and "cannot reach" in err
    # A job that does not finish in time: 6.
    code, out, err = gpuq(world, "wait", str(waiting["id"]), "--timeout", "0.5",
                          "--interval", "0.1")
    assert code == TIMEOUT and "timed out after 0.5 s" in out


def test_list_follows_the_api_pages(cli_world, settings):
    from portal.models import Job

    settings.API_PAGE_SIZE = 2  # the live server runs in this process
    world = cli_world
    for i in range(5):
        Job.objects.create(team=world["team_a"], submitter=world["member_a"], name=f"paged-{i}",
                           image="i:1", command=["true"], flavor=world["h100"])
    code, out, err = gpuq(world, "list", "-o", "json")
    assert code == OK, err
    assert sorted(j["name"] for j in json.loads(out)) == [f"paged-{i}" for i in range(5)]
    code, out, _ = gpuq(world, "list", "--limit", "3", "-o", "json")
    assert len(json.loads(out)) == 3


def test_the_config_file_gives_url_and_token_and_must_be_private(cli_world):
    world = cli_world
    config = world["tmp"] / "config" / "gpuq" / "config.yaml"
    config.parent.mkdir(parents=True)
    config.write_text(yaml.safe_dump({"url": world["url"], "token": world["tokens"]["lead_a"]}))
    config.chmod(0o600)
    code, out, err = gpuq(world, "quota", "list", "-o", "json", user=None,
                          env={"GPUQ_URL": ""})
    assert code == OK, err
    assert json.loads(out) == []
    config.chmod(0o644)
    code, _, err = gpuq(world, "quota", "list", user=None, env={"GPUQ_URL": ""})
    assert code == USAGE and "chmod 600" in err
