"""Gang jobs: submit, create on the cluster, cancel, and read their status back.

Writes of intent (:func:`job_submit`, :func:`job_cancel`) validate first, write
in one transaction with an audit event, and enqueue the cluster work with
``transaction.on_commit``. The cluster work (:func:`job_create`,
:func:`job_cancel_execute`, :func:`job_sync`) runs in Celery tasks, is
idempotent, raises :class:`queues.errors.TransientError` for the task to retry
and records permanent failures on the job.

Field names in errors are the API's (``priority``, not ``priority_class``), so
the API, the form and the live validation show each error next to its field.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone

from portal import access
from portal.models import Cluster, GpuFlavor, Job, PriorityClass, QuotaGrant, Team
from portal.selectors.quota import max_admissible_gpus
from portal.selectors.specs import cluster_specs, flavor_spec
from portal.services.audit import audit_record
from portal.services.fields import whole_count
from queues import jobs as qjobs
from queues import quantity
from queues import volcano_jobs as vjobs
from queues.errors import ClusterError, PermanentError
from queues.specs import SpecError

log = logging.getLogger(__name__)

_MAX_ERROR = 4000

#: The submit fields, in form order (also the keys of every ValidationError raised here).
SUBMIT_FIELDS = ("team", "name", "image", "command", "args", "env", "workers",
                 "gpus_per_worker", "flavor", "cpu_per_worker", "memory_per_worker",
                 "priority", "kind", "max_runtime_seconds")

#: JobSpec field names that the API calls differently.
_SPEC_FIELD_TO_API = {"priority_class": "priority", "queue": "team", "namespace": "team",
                      "team": "team", "gpu_resource": "flavor"}


def _spec_message(exc: SpecError) -> str:
    """The message of a :class:`SpecError`, with the item path when it is nested."""
    head = _api_field(exc.field)
    return exc.message if head == exc.field else f"{exc.field}: {exc.message}"


def _api_field(spec_field: str) -> str:
    """The API field a :class:`SpecError` ``field`` (maybe ``env[2].name``) belongs to."""
    head = spec_field.split("[", 1)[0].split(".", 1)[0]
    head = _SPEC_FIELD_TO_API.get(head, head)
    return head if head in SUBMIT_FIELDS else spec_field


@dataclass(frozen=True)
class JobPlan:
    """A checked submission: the :class:`queues.jobs.JobSpec` (rendered with
    ``job_id``), the rows it refers to and the GPU arithmetic.

    ``total_gpus`` = workers * gpus_per_worker (units of ``flavor.gpu_resource``);
    ``max_gpus`` = the most the team's queue can ever be admitted on the flavor
    (nominal + the most it can borrow, see
    :func:`portal.selectors.quota.max_admissible_gpus`).
    """

    spec: object
    flavor: GpuFlavor
    priority: PriorityClass | None
    total_gpus: int
    max_gpus: int
    values: dict


def _per_worker(amount_per_gpu: str, gpus: int) -> str:
    """``amount_per_gpu`` (quantity) times ``gpus``, as a quantity string."""
    return quantity.format_quantity(quantity.parse(amount_per_gpu) * Decimal(gpus),
                                    binary=quantity.is_binary(amount_per_gpu))


def job_check(
    *, actor, team: Team, name, image, command, args=(), env=(), workers, gpus_per_worker,
    flavor, cpu_per_worker="", memory_per_worker="", priority=None, kind=Job.Kind.JOB,
    max_runtime_seconds=None, job_id: int = 0,
) -> JobPlan:
    """Check a submission without writing anything; return the :class:`JobPlan`.

    ``flavor`` and ``priority`` are names (``priority`` ``None``/``""`` = none);
    ``command``/``args`` lists of strings; ``env`` a list of ``{name, value}``;
    ``workers``/``gpus_per_worker`` whole numbers >= 1 (``1.5`` refused, never
    rounded); ``cpu_per_worker``/``memory_per_worker`` quantities (empty = the
    flavor's per-GPU sizing times ``gpus_per_worker``); ``max_runtime_seconds``
    whole seconds or ``None``. Rules: the spec rules of
    :class:`queues.jobs.JobSpec` (names, image reference, env vars, ...); the
    flavor is in the team's cluster and the team holds quota on it; the name is
    not taken by a live job of the team; the job's total GPUs do not exceed
    what the team can ever be admitted. Raises :class:`PermissionDenied` for a
    user who may not submit to ``team``, :class:`ValidationError` with every
    error found as ``{field: [message]}``.
    """
    if not access.can_submit_job(actor, team):
        raise PermissionDenied("Only members of the team and platform staff can submit jobs.")
    errors: dict[str, list[str]] = {}

    def fail(field: str, message: str) -> None:
        errors.setdefault(field, []).append(message)

    counts = {}
    for field, value, allow_none in (("workers", workers, False),
                                     ("gpus_per_worker", gpus_per_worker, False),
                                     ("max_runtime_seconds", max_runtime_seconds, True)):
        try:
            counts[field] = whole_count(field, value, allow_none=allow_none)
        except ValidationError as exc:
            errors.update({k: list(v) for k, v in exc.message_dict.items()})
            continue
        if counts[field] is not None and counts[field] < 1:
            fail(field, "Must be 1 or more.")
    if kind not in Job.Kind.values:
        fail("kind", f"'{kind}' is not one of: {', '.join(Job.Kind.values)}.")

    flavor_row = GpuFlavor.objects.filter(cluster_id=team.cluster_id, name=flavor or "").first()
    grant = None
    if flavor_row is None:
        fail("flavor", f"No GPU flavor '{flavor}' in the cluster of team '{team.slug}'.")
    else:
        grant = QuotaGrant.objects.filter(team=team, flavor=flavor_row).first()
        if grant is None:
            fail("flavor", f"Team '{team.slug}' holds no quota on flavor '{flavor_row.name}'; "
                           "its lead can request some on the team page.")
    priority_row = None
    if priority:
        priority_row = PriorityClass.objects.filter(name=priority).first()
        if priority_row is None:
            fail("priority", f"No priority class named '{priority}'.")
    if isinstance(name, str) and Job.objects.filter(team=team, name=name,
                                                    deleted_at__isnull=True).exists():
        fail("name", f"Team '{team.slug}' already has a job named '{name}'; "
                     "choose another name or cancel that job first.")

    spec = None
    cpu, memory = cpu_per_worker or "", memory_per_worker or ""
    counts_ok = all(f not in errors for f in ("workers", "gpus_per_worker"))
    gpus = counts["gpus_per_worker"] if counts_ok else 1
    if flavor_row is not None:
        try:
            cpu = cpu or _per_worker(flavor_row.cpu_per_gpu, gpus)
            memory = memory or _per_worker(flavor_row.memory_per_gpu, gpus)
        except (ValueError, ArithmeticError):  # the flavor's sizing is unusable (or too
            # precise to multiply exactly): the user must say
            for field, value in (("cpu_per_worker", cpu), ("memory_per_worker", memory)):
                if not value:
                    fail(field, f"Flavor '{flavor_row.name}' has no usable per-GPU sizing; "
                                "give this amount.")
    for field, value in (("cpu_per_worker", cpu), ("memory_per_worker", memory)):
        limit = Job._meta.get_field(field).max_length
        if isinstance(value, str) and len(value) > limit:
            fail(field, f"At most {limit} characters, got {len(value)}.")
            cpu, memory = (None, memory) if field == "cpu_per_worker" else (cpu, None)
    # The spec rules run even when a portal check failed, with stand-ins for the
    # failed values (never kept), so one answer lists every field's error.
    try:
        spec = qjobs.JobSpec(
            namespace=team.slug, local_queue=team.slug, job_label=str(job_id or 0),
            name=name, image=image, command=command if command is not None else (),
            args=args if args is not None else (), env=env if env is not None else (),
            workers=counts["workers"] if counts_ok else 1, gpus_per_worker=gpus,
            gpu_resource=flavor_row.gpu_resource if flavor_row else "nvidia.com/gpu",
            flavor=flavor_row.name if flavor_row else "unknown",
            cpu_per_worker=cpu or "1", memory_per_worker=memory or "1Gi",
            priority_class=priority_row.name if priority_row else "",
            kind=kind if kind in Job.Kind.values else "job",
            max_runtime_seconds=counts.get("max_runtime_seconds"),
        )
    except SpecError as exc:
        field = _api_field(exc.field)
        if field not in errors:
            fail(field, _spec_message(exc))

    total = max_gpus = 0
    if counts_ok and grant is not None:
        total = counts["workers"] * counts["gpus_per_worker"]
        max_gpus = max_admissible_gpus(
            team=team, flavor=flavor_row, nominal=grant.nominal_gpus,
            borrowing_limit=grant.borrowing_limit_gpus,
            specs=cluster_specs(cluster=team.cluster),
        )
        if total > max_gpus:
            fail("gpus_per_worker",
                 f"needs {total} {flavor_row.gpu_resource} on {flavor_row.name}; "
                 f"the team can be admitted at most {max_gpus}")
    if errors:
        raise ValidationError(errors)
    return JobPlan(
        spec=spec, flavor=flavor_row, priority=priority_row, total_gpus=total,
        max_gpus=max_gpus,
        values={"name": spec.name, "image": spec.image, "command": list(spec.command),
                "args": list(spec.args),
                "env": [{"name": n, "value": v} for n, v in spec.env],
                "workers": spec.workers, "gpus_per_worker": spec.gpus_per_worker,
                "cpu_per_worker": spec.cpu_per_worker,
                "memory_per_worker": spec.memory_per_worker, "kind": spec.kind,
                "max_runtime_seconds": spec.max_runtime_seconds},
    )


def job_submit(*, actor, team: Team, **fields) -> Job:
    """Submit a gang job of ``team`` (any member, staff): checked, stored, then created.

    ``fields`` as in :func:`job_check`. Nothing is written on any error. In one
    transaction: the :class:`Job` row (phase ``Submitted``), its rendered
    manifest (a suspended Indexed Job or JobSet labelled for the team's
    LocalQueue) and an audit event; on commit ``portal.job_create`` is
    enqueued. Raises :class:`PermissionDenied` or :class:`ValidationError`
    naming the field (see :func:`job_check`).
    """
    plan = job_check(actor=actor, team=team, **fields)  # nothing is written on any error
    refusal = _queue_refusal(team)
    if refusal:
        raise ValidationError({"team": [f"Refused: {refusal}."]})
    try:
        with transaction.atomic():
            job = Job.objects.create(
                team=team, submitter=actor if getattr(actor, "is_authenticated", False) else None,
                flavor=plan.flavor, priority_class=plan.priority, **plan.values,
            )
            # The portal's job id labels the job and its pods: render once the row has it.
            spec = dataclasses.replace(plan.spec, job_label=str(job.pk))
            job.manifest = render_job(spec, cluster=team.cluster, flavor=plan.flavor)
            job.save(update_fields=["manifest"])
            audit_record(actor=actor, action="job.submitted", target=job, team=team,
                         after={"name": job.name, "kind": job.kind, "workers": job.workers,
                                "gpus_per_worker": job.gpus_per_worker,
                                "flavor": plan.flavor.name, "total_gpus": plan.total_gpus})
            _enqueue_on_commit("job_create_task", job.pk)
    except IntegrityError as exc:  # a concurrent submit took the name
        raise ValidationError({"name": [f"Team '{team.slug}' already has a job named "
                                        f"'{fields.get('name')}'."]}) from exc
    except SpecError as exc:
        raise ValidationError({_api_field(exc.field): [_spec_message(exc)]}) from exc
    return job


def _is_volcano(cluster: Cluster) -> bool:
    return cluster.backend == Cluster.Backend.VOLCANO


#: ``Job.kind`` -> how a multi-pod vcjob finds its peers (``queues.volcano_jobs.FRAMEWORKS``):
#: an Indexed Job becomes a pytorch-plugin gang (master + workers, RANK/WORLD_SIZE set),
#: a JobSet (headless Service, DNS hostnames) a svc+env gang.
VOLCANO_FRAMEWORK = {Job.Kind.JOB: "pytorch", Job.Kind.JOBSET: "svc"}


def render_job(spec, *, cluster: Cluster, flavor: GpuFlavor) -> dict:
    """The manifest of a checked :class:`queues.jobs.JobSpec` for ``cluster``'s backend.

    Kueue: :func:`queues.jobs.render_kueue_job` (suspended Job/JobSet; Kueue
    injects the flavor's node labels). Volcano:
    :func:`queues.volcano_jobs.render_volcano_job` with the flavor's node
    labels and tolerations and :data:`VOLCANO_FRAMEWORK` of the spec's kind.
    Raises :class:`queues.specs.SpecError`.
    """
    if _is_volcano(cluster):
        return vjobs.render_volcano_job(spec, flavor=flavor_spec(flavor),
                                        framework=VOLCANO_FRAMEWORK[spec.kind])
    return qjobs.render_kueue_job(spec)


def _queue_refusal(team: Team) -> str | None:
    """Why the team's Volcano Queue refuses new jobs now (closed), else ``None``.

    Read from the cluster (one GET of the Queue). Kueue clusters, a missing
    Queue (the reconciler will create it) or an unreachable cluster are not
    refusals: the job is stored and created by the worker as usual.
    """
    if not _is_volcano(team.cluster):
        return None
    try:
        queue = _port(None, None, cluster=team.cluster).get(
            vjobs.QUEUE_API_VERSION, "Queue", team.slug)
    except ClusterError as exc:
        log.warning("could not read the Volcano queue of %s: %s", team.slug, exc)
        return None
    return vjobs.queue_refusal(queue) if queue is not None else None


def _enqueue(task_name: str, job_id: int) -> None:
    from portal import tasks

    getattr(tasks, task_name).delay(job_id)


def _enqueue_on_commit(task_name: str, job_id: int) -> None:
    transaction.on_commit(lambda: _enqueue(task_name, job_id))


def job_refresh(*, job: Job) -> None:
    """Ask a worker to read ``job``'s status from the cluster now (``portal.job_sync``)."""
    _enqueue_on_commit("job_sync_task", job.pk)


def job_cancel(*, actor, job: Job) -> Job:
    """Request cancellation of ``job``; ``portal.job_cancel`` does it on the cluster.

    Staff may cancel any job, the team's lead any job of the team, a member
    only their own (:class:`PermissionDenied` otherwise). A job already
    Succeeded, Failed or Cancelled is a :class:`ValidationError` on ``phase``.
    Asking twice is harmless (the task is enqueued again). Returns the job.
    """
    if not access.can_cancel_job(actor, job):
        raise PermissionDenied("Only the job's submitter, the team's lead or platform staff "
                               "can cancel this job.")
    with transaction.atomic():
        job = Job.objects.select_for_update(of=("self",)).select_related(
            "team", "flavor", "submitter", "priority_class").get(pk=job.pk)
        if job.is_final:
            raise ValidationError({"phase": f"The job is already {job.phase}."})
        if job.cancel_requested_at is None:
            job.cancel_requested_at = timezone.now()
            job.save(update_fields=["cancel_requested_at"])
            audit_record(actor=actor, action="job.cancel_requested", target=job, team=job.team,
                         before={"phase": job.phase}, after={"cancel_requested": True})
        _enqueue_on_commit("job_cancel_task", job.pk)
    return job


# --- the cluster side (run by Celery tasks) -----------------------------------------


def _port(job: Job | None, port, *, cluster: Cluster | None = None):
    if port is not None:
        return port
    from portal.services.reconcile import cluster_port

    return cluster_port(cluster=cluster or job.team.cluster)


def _job_ref(job: Job) -> tuple[str, str, str, str]:
    meta = job.manifest["metadata"]
    return job.manifest["apiVersion"], job.manifest["kind"], meta["name"], meta["namespace"]


def _load(job_id: int) -> Job | None:
    return Job.objects.select_related("team", "team__cluster", "flavor").filter(pk=job_id).first()


def job_create(*, job_id: int, port=None) -> str:
    """Create job ``job_id``'s manifest on the cluster (``portal.job_create``).

    Returns ``"created"``, ``"exists"`` (already there: nothing written, so a
    job Kueue has since unsuspended is never suspended again), ``"skipped"``
    (gone, final or being cancelled) or ``"failed"`` (permanent error, recorded:
    phase ``Failed``, reason ``CreateFailed``). Raises
    :class:`queues.errors.TransientError` (recorded in ``last_error``) for the
    task to retry.
    """
    job = _load(job_id)
    if job is None or job.is_final or job.cancel_requested_at or not job.manifest:
        return "skipped"
    api_version, kind, name, namespace = _job_ref(job)
    port = _port(job, port)
    try:
        live = port.get(api_version, kind, name, namespace)
        outcome = "exists"
        if live is None:
            live = port.apply(job.manifest)
            outcome = "created"
    except PermanentError as exc:
        now = timezone.now()
        Job.objects.filter(pk=job_id).update(
            phase=Job.Phase.FAILED, reason="CreateFailed", finished_at=now,
            message=f"The cluster refused the job: {exc.message}"[:_MAX_ERROR],
            last_error=str(exc)[:_MAX_ERROR], status_synced_at=now)
        return "failed"
    except ClusterError as exc:
        Job.objects.filter(pk=job_id).update(last_error=str(exc)[:_MAX_ERROR])
        raise
    uid = (live.get("metadata") or {}).get("uid", "")
    Job.objects.filter(pk=job_id).update(cluster_uid=uid, last_error="")
    return outcome


def _workload_of(port, live: dict, namespace: str) -> dict | None:
    """The Workload Kueue made for the live job, or ``None`` (one list request)."""
    return qjobs.workload_for_job(port.list_workloads(namespace), live)


def job_cancel_execute(*, job_id: int, port=None) -> str:
    """Deactivate the job's Workload (``spec.active: false``), then delete the job.

    Kueue keeps running an admitted job that is merely suspended by hand;
    deactivating its Workload makes Kueue evict it and stop its pods
    (https://kueue.sigs.k8s.io/docs/concepts/workload/#active). The job is
    deleted afterwards (background propagation: its pods follow) and its
    phase becomes ``Cancelled`` - unless it had already finished, which the
    last status read decides. Returns ``"cancelled"`` or ``"skipped"``
    (nothing asked, or already done). Idempotent: a retry after a failed
    delete does not deactivate twice. Raises :class:`TransientError` for the
    task to retry.
    """
    job = _load(job_id)
    if job is None or job.cancel_requested_at is None or job.deleted_at is not None:
        return "skipped"
    if job.manifest and job.manifest.get("apiVersion") == vjobs.JOB_API_VERSION:
        return _volcano_cancel(job, _port(job, port))
    api_version, kind, name, namespace = _job_ref(job)
    port = _port(job, port)
    workload = None
    try:
        live = port.get(api_version, kind, name, namespace)
        if live is not None:
            workload = _workload_of(port, live, namespace)
            if workload is not None and (workload.get("spec") or {}).get("active", True):
                port.deactivate_workload(namespace, workload["metadata"]["name"])
            port.delete_background(api_version, kind, name, namespace)
    except ClusterError as exc:
        Job.objects.filter(pk=job_id).update(last_error=str(exc)[:_MAX_ERROR])
        raise
    now = timezone.now()
    with transaction.atomic():
        job = Job.objects.select_for_update(of=("self",)).select_related("team").get(pk=job_id)
        before = job.phase
        detail = ("Workload deactivated (spec.active: false), then the job deleted."
                  if workload is not None else "Job deleted (Kueue had no Workload for it yet).")
        job.timeline = _merge_timeline(list(job.timeline or []), [{
            "source": "Portal", "type": "Cancelled", "status": "True", "reason": "Cancelled",
            "message": detail, "time": _rfc3339(now)}])
        if not job.is_final:
            job.phase = Job.Phase.CANCELLED
            job.reason = "Cancelled"
            job.message = f"Cancelled on request: {detail}"
            job.finished_at = now
        job.queue_position = None
        job.deleted_at = now
        job.last_error = ""
        job.save()
        audit_record(actor=None, action="job.cancelled", target=job, team=job.team,
                     before={"phase": before}, after={"phase": job.phase})
    return "cancelled"


#: vcjob phases in which its pods are stopped for good (abort done, or over).
_VOLCANO_STOPPED = ("Aborted", "Terminating", "Terminated", "Completed", "Failed")


def _volcano_cancel(job: Job, port) -> str:
    """Cancel a vcjob in two level-triggered steps (a vcjob has no suspend field).

    1. While it still runs: an ``AbortJob`` Command (Volcano kills the pods and
       keeps the vcjob, ``Aborted``); the job shows ``Cancelled``. Returns
       ``"aborting"``.
    2. Once Volcano reports it stopped (``Aborted`` or finished) - on the next
       run, which ``portal.jobs_sync`` makes for every job being cancelled - a
       ``TerminateJob`` Command, then the vcjob is deleted (its pods, PodGroup
       and Commands follow by owner references). Returns ``"cancelled"``.

    Raises :class:`TransientError` for the task to retry.
    """
    api_version, kind, name, namespace = _job_ref(job)
    try:
        live = port.get(api_version, kind, name, namespace)
        phase = (((live or {}).get("status") or {}).get("state") or {}).get("phase") or ""
        if live is not None and phase not in _VOLCANO_STOPPED:
            if phase != "Aborting":
                port.issue_command(vjobs.render_command(
                    job=live, action=vjobs.ABORT, message="cancelled through the portal"))
            step, detail = "aborting", "AbortJob command sent; Volcano stops its pods."
        else:
            if live is not None:
                if phase == "Aborted":
                    port.issue_command(vjobs.render_command(
                        job=live, action=vjobs.TERMINATE, message="deleted by the portal"))
                port.delete_background(api_version, kind, name, namespace)
            step, detail = "cancelled", "TerminateJob command sent, then the job deleted."
    except ClusterError as exc:
        Job.objects.filter(pk=job.pk).update(last_error=str(exc)[:_MAX_ERROR])
        raise
    now = timezone.now()
    with transaction.atomic():
        job = Job.objects.select_for_update(of=("self",)).select_related("team").get(pk=job.pk)
        before = job.phase
        job.timeline = _merge_timeline(list(job.timeline or []), [{
            "source": "Portal", "type": "Cancelled" if step == "cancelled" else "Aborting",
            "status": "True", "reason": "Cancelled", "message": detail, "time": _rfc3339(now)}])
        if not job.is_final or (job.phase == Job.Phase.CANCELLED and step == "cancelled"):
            job.phase = Job.Phase.CANCELLED
            job.reason = "Cancelled"
            job.message = f"Cancelled on request: {detail}"
            job.finished_at = job.finished_at or now
        job.queue_position = None
        if step == "cancelled":
            job.deleted_at = now
        job.last_error = ""
        job.save()
        if step == "cancelled" or before != Job.Phase.CANCELLED:
            audit_record(actor=None, action=f"job.{step}", target=job, team=job.team,
                         before={"phase": before}, after={"phase": job.phase})
    return step


def _volcano_status(port, job: Job, live: dict | None, now: datetime):
    """Read the vcjob's PodGroup and Queue, and explain them (:func:`interpret_volcano`)."""
    podgroup = queue = None
    if live is not None:
        meta = live.get("metadata") or {}
        if meta.get("uid"):
            podgroup = port.get(vjobs.PODGROUP_API_VERSION, "PodGroup",
                                vjobs.podgroup_name(meta["name"], meta["uid"]),
                                meta.get("namespace"))
        queue_name = (live.get("spec") or {}).get("queue")
        if queue_name:
            queue = port.get(vjobs.QUEUE_API_VERSION, "Queue", queue_name)
    return vjobs.interpret_volcano(job=live, podgroup=podgroup, now=now, queue=queue,
                                   cancelled=job.cancel_requested_at is not None)


def _rfc3339(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _merge_timeline(old: list[dict], new: list[dict]) -> list[dict]:
    """Union of timeline entries (``{source, type, status, reason, message, time}``),
    sorted by time: Kueue keeps only each condition's latest state, so entries
    from earlier reads are kept."""
    def key(entry: dict) -> tuple:
        return tuple(str(entry.get(k) or "") for k in ("time", "source", "type", "status",
                                                        "reason", "message"))

    merged = {key(e): dict(e) for e in old}
    for entry in new:
        merged.setdefault(key(entry), dict(entry))
    return sorted(merged.values(), key=lambda e: (str(e.get("time") or ""),
                                                  str(e.get("source") or "")))


def job_sync(*, job_id: int, port=None, now: datetime | None = None) -> str | None:
    """Read job ``job_id``, its Workload, events and queue position; store the status.

    Reads (through the cluster port): the Job/JobSet, the namespace's
    Workloads, the events about the job and its Workload, and the LocalQueue's
    pending workloads from Kueue's visibility API (for the 0-based queue
    position). :func:`queues.jobs.interpret_kueue` turns them into the phase,
    reason, message, admitted flavor, preemptions and timeline; preemption
    times and timeline entries from earlier reads are kept (Kueue keeps only
    the latest condition). Returns the new phase, or ``None`` when there is
    nothing to read (no manifest, or deleted on cancel). A job being cancelled
    whose object still exists gets its cancel re-enqueued (level-triggered).
    Raises :class:`TransientError` for the task to retry.
    """
    job = _load(job_id)
    if job is None or not job.manifest or job.deleted_at is not None:
        return None
    now = now or timezone.now()
    api_version, kind, name, namespace = _job_ref(job)
    port = _port(job, port)
    workload, events, position, status = None, [], None, None
    try:
        live = port.get(api_version, kind, name, namespace)
        if live is None and (not job.cluster_uid or job.is_final):
            return job.phase  # not created yet (job_create will), or over and gone
        if api_version == vjobs.JOB_API_VERSION:
            status = _volcano_status(port, job, live, now)
        elif live is not None:
            workload = _workload_of(port, live, namespace)
            events = port.list_events(namespace, name, kind)
            if workload is not None:
                wl_name = workload["metadata"]["name"]
                events += port.list_events(namespace, wl_name, "Workload")
                if not (workload.get("status") or {}).get("admission"):
                    position = _queue_position(port, live, namespace, wl_name)
    except ClusterError as exc:
        Job.objects.filter(pk=job_id).update(last_error=str(exc)[:_MAX_ERROR])
        raise
    known = [t for t in (qjobs.parse_time(v) for v in job.preemption_times or []) if t]
    if status is None:
        status = qjobs.interpret_kueue(
            job=live, workload=workload, events=events, queue_position=position, now=now,
            cancelled=job.cancel_requested_at is not None, known_preemption_times=known)
    with transaction.atomic():
        job = Job.objects.select_for_update().get(pk=job_id)
        if job.deleted_at is not None or job.is_final:
            return job.phase
        if live is None and status.phase == Job.Phase.SUBMITTED:
            # It was created, and is gone without a trace of finishing.
            job.phase, job.reason = Job.Phase.FAILED, "Deleted"
            job.message = "The job was deleted from the cluster outside the portal."
            job.finished_at = now
        else:
            job.phase, job.reason, job.message = status.phase, status.reason, status.message
            for field in ("admitted_at", "started_at", "finished_at"):
                value = getattr(status, field)
                if value is not None:
                    setattr(job, field, value)
        job.queue_position = status.queue_position
        job.admitted_flavor = status.admitted_flavor or job.admitted_flavor
        job.preemption_times = [_rfc3339(t) for t in status.preemption_times]
        job.preemptions = max(job.preemptions, status.preemptions)
        job.last_preemptor = status.preemptor or job.last_preemptor
        job.preemption_loop = status.preemption_loop
        job.timeline = _merge_timeline(list(job.timeline or []), list(status.timeline))
        job.status_synced_at = now
        job.last_error = ""
        if live is not None and not job.cluster_uid:  # created by a worker that died
            job.cluster_uid = (live.get("metadata") or {}).get("uid", "")
        job.save()
    if job.cancel_requested_at is not None and live is not None:
        _enqueue_on_commit("job_cancel_task", job_id)
    return job.phase


def _queue_position(port, live: dict, namespace: str, workload_name: str) -> int | None:
    """0-based position of the Workload in its LocalQueue (visibility API), ``None`` if absent.

    The visibility API answers 404 when the LocalQueue is missing or the API is
    not served: the position is then unknown, not an error of the job.
    """
    local_queue = ((live.get("metadata") or {}).get("labels") or {}).get(qjobs.QUEUE_NAME_LABEL)
    if not local_queue:
        return None
    try:
        pending = port.pending_workloads(namespace, local_queue)
    except PermanentError as exc:
        if exc.status == 404:
            return None
        raise
    for index, item in enumerate(pending):
        if (item.get("metadata") or {}).get("name") == workload_name:
            position = item.get("positionInLocalQueue")
            return int(position) if isinstance(position, int) else index
    return None


#: Phases whose status can still change on the cluster.
LIVE_PHASES = (Job.Phase.SUBMITTED, Job.Phase.QUEUED, Job.Phase.ADMITTED, Job.Phase.RUNNING)


def jobs_to_sync() -> list[int]:
    """Ids of jobs whose status may still change (not final, still on the cluster)."""
    return list(Job.objects.filter(phase__in=LIVE_PHASES, deleted_at__isnull=True)
                .order_by("pk").values_list("pk", flat=True))


def jobs_sync(*, now: datetime | None = None) -> dict:
    """Sync every job whose status may still change (what ``portal.jobs_sync`` runs).

    Jobs being cancelled whose object is not deleted yet are cancelled again, and
    ``Submitted`` jobs never seen on the cluster are created (level-triggered: a
    lost create or cancel task loses nothing). One cluster port per
    cluster. A job whose read fails keeps its ``last_error`` and is retried on
    the next run. Returns ``{"synced", "cancelled", "failed"}``.
    """
    ports: dict[int, object] = {}
    counts = {"synced": 0, "cancelled": 0, "failed": 0}
    cancelling = set(Job.objects.filter(cancel_requested_at__isnull=False,
                                        deleted_at__isnull=True).values_list("pk", flat=True))
    rows = Job.objects.filter(pk__in=set(jobs_to_sync()) | cancelling).order_by("pk")
    for job_id, cluster_id, uid, phase in rows.values_list("pk", "team__cluster_id",
                                                           "cluster_uid", "phase"):
        try:
            if cluster_id not in ports:
                ports[cluster_id] = _port(_load(job_id), None)
            if job_id in cancelling:
                job_cancel_execute(job_id=job_id, port=ports[cluster_id])
                counts["cancelled"] += 1
            else:
                if not uid and phase == Job.Phase.SUBMITTED:
                    # Never seen on the cluster: its portal.job_create may have died with
                    # a worker (Redis gives an unacked task back only after an hour).
                    # job_create is idempotent: it creates only what is not there.
                    job_create(job_id=job_id, port=ports[cluster_id])
                job_sync(job_id=job_id, port=ports[cluster_id], now=now)
                counts["synced"] += 1
        except ClusterError as exc:
            log.warning("sync of job %s failed: %s", job_id, exc)
            counts["failed"] += 1
    return counts
