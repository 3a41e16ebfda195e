"""Idle GPUs: flag (from stored 5-minute samples), notify (email outbox, webhook POSTed by
the worker), snooze once, reclaim after the grace period with audit - the Workload on the
API emulator gets ``spec.active: false`` and is not deleted."""

import json
import threading
import time
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.core import mail
from django.core.exceptions import PermissionDenied, ValidationError
from django.utils import timezone

from portal.models import AuditEvent, IdleFlag
from portal.services.idle import idle_detect, idle_flag_reclaim, idle_flag_snooze, idle_notify
from portal.services.usage import STEP, floor_to, usage_collect
from queues.metrics import parse_exposition
from tests.dcgm import dcgm_line
from tests.factories import make_cluster, make_flavor, make_team, make_user
from tests.integration.utilization.conftest import make_job

pytestmark = pytest.mark.integration


def activity(percent: float, pod: str = "train-0-x2kq9", namespace: str = "team-a"):
    """DCGM samples of the train job's 2 GPUs at ``percent`` each."""
    text = "\n".join(dcgm_line("DCGM_FI_DEV_GPU_UTIL", percent, gpu=str(g), node="node-1",
                               namespace=namespace, pod=pod) for g in range(2)) + "\n"
    return parse_exposition(text)


def history(now, *, busy_hours_ago: float, hours: float):
    """Store ``hours`` of 5-minute samples ending at ``now``: 50 % until
    ``busy_hours_ago``, then 1 % (below the 5 % threshold)."""
    steps = int(hours * 3600 / STEP)
    for k in range(steps, -1, -1):
        at = now - timedelta(seconds=k * STEP)
        busy = at <= now - timedelta(hours=busy_hours_ago)
        usage_collect(at=at, samples=activity(50 if busy else 1))


def small_world(**cluster_fields):
    cluster = make_cluster(name="gpu-east", idle_window_hours=2, **cluster_fields)
    h100 = make_flavor(cluster=cluster, name="h100")
    team = make_team(cluster=cluster, slug="team-a")
    owner = make_user("owner", team=team)
    owner.email = "owner@example.org"
    owner.save()
    lead = make_user("lead", team=team, role="lead")
    lead.email = "lead@example.org"
    lead.save()
    other = make_user("other", team=team)
    staff = make_user("staff", staff=True)
    job = make_job(team=team, flavor=h100, name="train", gpus_per_worker=2, submitter=owner,
                   cluster_uid="0b0f7e7e-1111-4222-8333-444455556666")
    return {"cluster": cluster, "team": team, "owner": owner, "lead": lead, "other": other,
            "staff": staff, "job": job}


def test_flag_notify_snooze_and_reclaim_rules(db, settings, django_capture_on_commit_callbacks):
    w = small_world()
    now = floor_to(timezone.now(), STEP)
    history(now, busy_hours_ago=3, hours=4)  # idle for the last 3 h; window is 2 h

    with django_capture_on_commit_callbacks() as callbacks:
        result = idle_detect(now=now)
    assert len(callbacks) == 1  # portal.idle_notify, enqueued on commit
    (flag,) = IdleFlag.objects.all()
    assert result.flagged == [flag.pk]
    assert (flag.state, flag.gpus, flag.threshold, flag.window_hours) == ("open", 2, 0.05, 2)
    assert flag.activity == pytest.approx(0.01)
    # the last busy bucket ends 3 h ago (a sample at t covers the 5 minutes before t)
    assert flag.idle_since == now - timedelta(hours=3)
    assert flag.reclaimable_at == now + timedelta(hours=settings.IDLE_GRACE_HOURS)
    assert idle_detect(now=now).flagged == []  # one live flag per job

    sent = idle_notify(flag_id=flag.pk)
    assert sent == {"emailed": ["lead@example.org", "owner@example.org"], "webhooks": []}
    (message,) = mail.outbox
    assert message.to == ["lead@example.org", "owner@example.org"]
    assert "team-a/train holds 2 GPUs" in message.body
    assert "below 5 %" in message.body
    assert idle_notify(flag_id=flag.pk)["emailed"] == []  # once
    assert len(mail.outbox) == 1

    with pytest.raises(PermissionDenied):
        idle_flag_snooze(actor=w["other"], flag=flag, justification="not my job to say")
    with pytest.raises(ValidationError) as info:
        idle_flag_snooze(actor=w["owner"], flag=flag, justification="  short ")
    assert "justification" in info.value.message_dict
    flag.refresh_from_db()
    assert flag.state == "open"  # nothing written

    snoozed = idle_flag_snooze(actor=w["owner"], flag=flag, now=now,
                               justification="Evaluation restarts after the data copy.")
    assert snoozed.state == "snoozed"
    assert snoozed.reclaimable_at == now + timedelta(hours=settings.IDLE_SNOOZE_HOURS)
    with pytest.raises(ValidationError, match="already snoozed"):
        idle_flag_snooze(actor=w["owner"], flag=flag, justification="And once more, please.")
    event = AuditEvent.objects.get(action="idle_flag.snoozed")
    assert (event.actor, event.after["justification"]) == (
        w["owner"], "Evaluation restarts after the data copy.")

    with pytest.raises(PermissionDenied):
        idle_flag_reclaim(actor=w["lead"], flag=flag, now=now)
    with pytest.raises(ValidationError, match="grace period"):
        idle_flag_reclaim(actor=w["staff"], flag=flag, now=now + timedelta(hours=1))
    assert not AuditEvent.objects.filter(action="idle_flag.reclaimed").exists()


def test_busy_again_clears_and_no_data_never_flags(db):
    w = small_world()
    now = floor_to(timezone.now(), STEP)
    history(now, busy_hours_ago=3, hours=4)
    idle_detect(now=now)
    later = now + timedelta(minutes=5)
    usage_collect(at=later, samples=activity(60))
    result = idle_detect(now=later)
    assert result.flagged == []
    flag = IdleFlag.objects.get()
    assert (flag.state, flag.clear_reason) == ("cleared", "GPU activity rose above the threshold")
    assert result.cleared == [flag.pk]

    # a second job whose GPUs never report: no data is not idle
    make_job(team=w["team"], flavor=w["job"].flavor, name="silent")
    for k in range(40):
        usage_collect(at=later + timedelta(minutes=5 * (k + 1)), samples=activity(60))
    assert idle_detect(now=later + timedelta(hours=4)).flagged == []


class _Hook(BaseHTTPRequestHandler):
    posts: list = []

    def log_message(self, *args):
        pass

    def do_POST(self):  # noqa: N802
        length = int(self.headers.get("Content-Length", 0))
        type(self).posts.append(json.loads(self.rfile.read(length)))
        self.send_response(204)
        self.end_headers()


@pytest.fixture
def webhook():
    handler = type("Hook", (_Hook,), {"posts": []})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield handler, f"http://127.0.0.1:{httpd.server_address[1]}/hook"
    httpd.shutdown()
    httpd.server_close()


def wait_for(check, timeout=30.0, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.1)
    pytest.fail(f"timed out waiting for {what}")


def test_webhook_and_reclaim_through_the_worker(transactional_db, kube_emulator,
                                                celery_worker_process, webhook, settings):
    from queues.cluster import KubernetesCluster

    hook, url = webhook
    w = small_world(idle_webhook_url=url)
    port = KubernetesCluster(kubeconfig=settings.KUBECONFIG)
    port.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}})
    workload = port.apply({
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
        "metadata": {"name": "job-train-3f2a1", "namespace": "team-a",
                     "labels": {"kueue.x-k8s.io/job-uid": w["job"].cluster_uid}},
        "spec": {"active": True, "queueName": "team-a", "podSets": [{
            "name": "main", "count": 1, "template": {"spec": {"containers": [
                {"name": "worker", "image": "registry.example/train:1"}]}}}]},
    })
    assert workload["spec"]["active"] is True

    now = floor_to(timezone.now(), STEP)
    history(now, busy_hours_ago=3, hours=4)
    idle_detect(now=now)  # on commit: the worker notifies, then POSTs the webhook
    (post,) = wait_for(lambda: hook.posts, what="the webhook POST")
    flag = IdleFlag.objects.get()
    assert post == {"event": "idle_gpu_flag", "flag": flag.pk, "state": "open",
                    "team": "team-a", "job": "train", "gpus": 2.0,
                    "activity": pytest.approx(0.01), "threshold": 0.05,
                    "idle_since": flag.idle_since.isoformat(),
                    "reclaimable_at": flag.reclaimable_at.isoformat()}
    wait_for(lambda: IdleFlag.objects.filter(pk=flag.pk, notified_at__isnull=False).exists(),
             what="notified_at")

    reclaimed = idle_flag_reclaim(actor=w["staff"], flag=flag,
                                  now=flag.reclaimable_at + timedelta(seconds=1))
    assert reclaimed.state == "reclaimed"
    wait_for(lambda: port.get("kueue.x-k8s.io/v1beta2", "Workload", "job-train-3f2a1",
                              "team-a")["spec"]["active"] is False,
             what="Workload spec.active false")
    decided = AuditEvent.objects.get(action="idle_flag.reclaimed")
    assert (decided.actor, decided.team, decided.after["job"]) == (w["staff"], w["team"],
                                                                 "train")
    done = wait_for(lambda: AuditEvent.objects.filter(action="job.deactivated").first(),
                    what="the job.deactivated audit event")
    assert done.after == {"backend": "kueue", "kind": "Workload", "name": "job-train-3f2a1",
                          "active": False}
    # deactivated, never deleted
    assert port.get("kueue.x-k8s.io/v1beta2", "Workload", "job-train-3f2a1", "team-a")
    assert idle_detect(now=now + timedelta(minutes=5)).flagged == []  # not flagged again


def test_volcano_reclaim_through_the_worker_aborts_and_keeps_the_vcjob(
        transactional_db, kube_emulator, celery_worker_process, settings):
    """Flag -> grace -> staff reclaim on a Volcano cluster: the worker creates an AbortJob
    ``bus.volcano.sh/v1alpha1`` Command targeting the live vcjob; the vcjob is never deleted
    and Volcano (played by ``harness.sim.volcano_objects``) leaves it ``Aborted``."""
    from harness.sim import volcano_objects as volcano_sim
    from queues.backends.volcano.jobs import (
        COMMAND_API_VERSION,
        JOB_API_VERSION,
        render_volcano_job,
    )
    from queues.cluster import KubernetesCluster
    from queues.jobs import JobSpec

    w = small_world(backend="volcano")
    port = KubernetesCluster(kubeconfig=settings.KUBECONFIG)
    port.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}})
    live = port.apply(render_volcano_job(JobSpec(
        namespace="team-a", local_queue="team-a", job_label=str(w["job"].pk), name="train",
        image="registry.example/train:1", workers=1, gpus_per_worker=2,
        gpu_resource="nvidia.com/gpu", flavor="h100", cpu_per_worker="8",
        memory_per_worker="64Gi")))
    volcano_sim.create_podgroup(port, live)
    volcano_sim.set_podgroup(port, live, phase="Running", running=1, scheduled=True)
    volcano_sim.set_job_state(port, live, phase="Running", running=1)

    now = floor_to(timezone.now(), STEP)
    history(now, busy_hours_ago=3, hours=4)
    idle_detect(now=now)
    flag = IdleFlag.objects.get()
    assert (flag.job_id, flag.gpus, flag.state) == (w["job"].pk, 2, "open")
    with pytest.raises(ValidationError, match="grace period"):
        idle_flag_reclaim(actor=w["staff"], flag=flag, now=now + timedelta(hours=1))
    assert port.list(COMMAND_API_VERSION, "Command", "", "team-a") == []

    reclaimed = idle_flag_reclaim(actor=w["staff"], flag=flag,
                                  now=flag.reclaimable_at + timedelta(seconds=1))
    assert reclaimed.state == "reclaimed"
    done = wait_for(lambda: AuditEvent.objects.filter(action="job.deactivated").first(),
                    what="the job.deactivated audit event")
    assert done.after == {"backend": "volcano", "kind": "Command", "name": "train-abortjob",
                          "action": "AbortJob"}
    assert (done.team, done.before) == (w["team"], {"phase": "Running"})
    (command,) = port.list(COMMAND_API_VERSION, "Command", "", "team-a")
    assert (command["metadata"]["name"], command["action"], command["reason"]) == (
        "train-abortjob", "AbortJob", "IdleGPUReclaim")
    assert command["target"] == {"apiVersion": JOB_API_VERSION, "kind": "Job", "name": "train",
                                 "uid": live["metadata"]["uid"]}
    assert command["metadata"]["ownerReferences"][0]["uid"] == live["metadata"]["uid"]
    decided = AuditEvent.objects.get(action="idle_flag.reclaimed")
    assert (decided.actor, decided.after["job"]) == (w["staff"], "train")

    # Volcano's job controller executes it: the pods stop, the vcjob stays (Aborted).
    assert volcano_sim.execute_commands(port, "team-a") == [("AbortJob", "train")]
    kept = port.get(JOB_API_VERSION, "Job", "train", "team-a")
    assert kept is not None and kept["metadata"]["uid"] == live["metadata"]["uid"]
    assert (kept["status"]["state"]["phase"], kept["status"]["state"]["reason"]) == (
        "Aborted", "IdleGPUReclaim")
    assert port.list(COMMAND_API_VERSION, "Command", "", "team-a") == []
    # No delete request ever reached the vcjob.
    assert "delete" not in kube_emulator.counters.snapshot()["by_resource"].get(
        "batch.volcano.sh/jobs", {})
