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
from portal.services.images import registry_problem
from queues import jobs as qjobs
from queues import quantity
from queues import volcano_jobs as vjobs
from queues.errors import ClusterError, PermanentError, TransientError
from queues.render.labels import JOB_LABEL, KIND_JOB, KIND_LABEL, managed_selector
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
    max_runtime_seconds=None, job_id: int = 0, sim_duration_seconds=None, sim_outcome="",
    sim_profile="",
) -> JobPlan:
    """Check a submission without writing anything; return the :class:`JobPlan`.

    ``flavor`` and ``priority`` are names (``priority`` ``None``/``""`` = none);
    ``command``/``args`` lists of strings; ``env`` a list of ``{name, value}``;
    ``workers``/``gpus_per_worker`` whole numbers >= 1 (``1.5`` refused, never
    rounded); ``cpu_per_worker``/``memory_per_worker`` quantities (empty = the
    flavor's per-GPU sizing times ``gpus_per_worker``); ``max_runtime_seconds``
    whole seconds or ``None``. ``sim_duration_seconds`` / ``sim_outcome`` /
    ``sim_profile``: optional, for simulated clusters only (demo, replay): become
    ``sim.portal.gpu/*`` annotations (:func:`queues.jobs.sim_annotations`). Rules: the spec rules of
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
    if isinstance(image, str) and (problem := registry_problem(image)):
        fail("image", f"Refused: {problem}.")
    if isinstance(name, str) and Job.objects.filter(team=team, name=name,
                                                    deleted_at__isnull=True).exclude(
                                                        phase__in=Job.FINAL_PHASES).exists():
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
    annotations = ()
    try:
        annotations = qjobs.sim_annotations(duration_seconds=sim_duration_seconds,
                                            outcome=sim_outcome or "", profile=sim_profile or "")
    except SpecError as exc:
        fail(exc.field, exc.message)
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
            max_runtime_seconds=counts.get("max_runtime_seconds"), annotations=annotations,
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
                "max_runtime_seconds": spec.max_runtime_seconds,
                "sim_duration_seconds": sim_duration_seconds, "sim_outcome": sim_outcome or "",
                "sim_profile": sim_profile or ""},
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
    job Kueue has since unsuspended is never suspended again), ``"cancelled"``
    (a cancel was recorded before the create ran or while it was in flight: the
    job is handed to :func:`job_cancel_execute`, which deletes whatever exists
    of it, so a create racing a cancel leaves nothing on the cluster),
    ``"skipped"`` (gone, final or no manifest) or ``"failed"`` (permanent error,
    recorded: phase ``Failed``, reason ``CreateFailed``). The cancel state is
    read again under the job's row lock after the apply: a cancel recorded
    after that read finds the object on the cluster. Raises
    :class:`queues.errors.TransientError` (recorded in ``last_error``) for the
    task to retry.
    """
    job = _load(job_id)
    if job is None or not job.manifest:
        return "skipped"
    if job.cancel_requested_at is not None:
        job_cancel_execute(job_id=job_id, port=port)
        return "cancelled"
    if job.is_final:
        return "skipped"
    api_version, kind, name, namespace = _job_ref(job)
    port = _port(job, port)
    try:
        live = port.get(api_version, kind, name, namespace)
        earlier = _labels(live).get(JOB_LABEL, "") if live is not None else ""
        if earlier.isdigit() and earlier != str(job.pk):  # an earlier job of the same name
            _clear_finished_namesake(port, job, live)  # raises TransientError: retried
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
    with transaction.atomic():
        locked = Job.objects.select_for_update().filter(pk=job_id).first()
        cancelled = locked is None or locked.cancel_requested_at is not None
        if not cancelled:
            locked.cluster_uid, locked.last_error = uid, ""
            locked.save(update_fields=["cluster_uid", "last_error"])
    if cancelled:  # cancelled while the apply was in flight
        if locked is None:
            _delete_leftover(port, job)
        else:
            job_cancel_execute(job_id=job_id, port=port)
        return "cancelled"
    return outcome


def _labels(live: dict) -> dict:
    return ((live or {}).get("metadata") or {}).get("labels") or {}


def _clear_finished_namesake(port, job: Job, live: dict) -> None:
    """The cluster still holds an earlier job of the same name (a finished job's name
    may be reused): delete that object when its job is finished (or unknown to the
    portal), mark that job ``deleted_at``, and raise :class:`TransientError` so the
    create is retried once the object is gone. Raises TransientError as well while
    the namesake is live (it is never touched then)."""
    earlier_pk = _labels(live)[JOB_LABEL]
    earlier = Job.objects.filter(pk=int(earlier_pk)).first()
    if earlier is not None and not earlier.is_final:
        raise TransientError(f"job {earlier.pk} named '{job.name}' is still live on the "
                             "cluster; waiting for it", reason="NameInUse")
    api_version, kind, name, namespace = _job_ref(job)
    port.delete_background(api_version, kind, name, namespace)
    if earlier is not None:
        Job.objects.filter(pk=earlier.pk, deleted_at__isnull=True).update(
            deleted_at=timezone.now())
    raise TransientError(f"deleting finished job {earlier_pk} named '{job.name}' from "
                         "the cluster before creating this one", reason="NameReused")


def _delete_leftover(port, job: Job) -> bool:
    """Delete the job's object if it exists and is this job's (its ``portal.gpu/job``
    label is ``job.pk``: a later job of the team may reuse the name). ``True`` if
    deleted. Raises :class:`queues.errors.ClusterError`."""
    api_version, kind, name, namespace = _job_ref(job)
    live = port.get(api_version, kind, name, namespace)
    labels = ((live or {}).get("metadata") or {}).get("labels") or {}
    if live is None or labels.get(JOB_LABEL) != str(job.pk):
        return False
    return port.delete_background(api_version, kind, name, namespace)


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
    delete does not deactivate twice. Once done (``deleted_at`` set), a run
    still deletes whatever exists of the job (a create that was in flight
    during the cancel; see :func:`job_create`) and records it in the timeline
    and an audit event ``job.leftover_deleted``. Raises
    :class:`TransientError` for the task to retry.
    """
    job = _load(job_id)
    if job is None or job.cancel_requested_at is None:
        return "skipped"
    if job.deleted_at is not None:
        return _cancel_leftover(job, _port(job, port))
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


def _cancel_leftover(job: Job, port) -> str:
    """The cancel is done, yet the job's object may exist (created by a create task that
    was in flight): delete it outright - nothing will sync this job again. Returns
    ``"cancelled"`` if something was deleted, else ``"skipped"``."""
    if not job.manifest:
        return "skipped"
    try:
        deleted = _delete_leftover(port, job)
    except ClusterError as exc:
        Job.objects.filter(pk=job.pk).update(last_error=str(exc)[:_MAX_ERROR])
        raise
    if not deleted:
        return "skipped"
    now = timezone.now()
    detail = "A job created while the cancel ran was deleted."
    with transaction.atomic():
        job = Job.objects.select_for_update(of=("self",)).select_related("team").get(pk=job.pk)
        job.timeline = _merge_timeline(list(job.timeline or []), [{
            "source": "Portal", "type": "Cancelled", "status": "True", "reason": "Cancelled",
            "message": detail, "time": _rfc3339(now)}])
        job.last_error = ""
        job.save(update_fields=["timeline", "last_error"])
        audit_record(actor=None, action="job.leftover_deleted", target=job, team=job.team,
                     before={"phase": job.phase}, after={"deleted": job.manifest["kind"]})
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


def _volcano_interpret(job: Job, live: dict | None, podgroup: dict | None, queue: dict | None,
                       now: datetime):
    """``(JobStatus, partly_placed_since)`` of a vcjob from what was read.

    ``partly_placed_since`` is when the portal first saw the gang partly placed
    (``0 < running < minAvailable``, :func:`queues.volcano_jobs.is_partly_placed`):
    the stored ``job.partly_placed_since``, or ``now`` on the first such read;
    ``None`` when the gang is not partly placed (the clock is cleared). It is the
    clock of :data:`queues.volcano_jobs.PARTLY_PLACED_AFTER`, not the vcjob's phase
    transition time.
    """
    since = None
    if vjobs.is_partly_placed(live, podgroup):
        since = job.partly_placed_since or now
    status = vjobs.interpret_volcano(job=live, podgroup=podgroup, now=now, queue=queue,
                                     cancelled=job.cancel_requested_at is not None,
                                     partly_placed_since=since)
    return status, since


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


@dataclass
class _Reads:
    """What a status read found of one job: the live object (``None``: absent) and,
    for Kueue, its Workload, the events about both (oldest first) and its 0-based
    queue position; for Volcano, its PodGroup and Queue."""

    live: dict | None
    workload: dict | None = None
    events: list = dataclasses.field(default_factory=list)
    position: int | None = None
    podgroup: dict | None = None
    queue: dict | None = None


def _read_job(port, job: Job) -> _Reads:
    """Read one job from the cluster, request by request (:func:`job_sync`).

    Kueue: the job, the namespace's Workloads, the events about the job and about
    its Workload, the LocalQueue's pending workloads (only while not admitted):
    5 requests. Volcano: the vcjob, its PodGroup and its Queue: 3 requests.
    """
    api_version, kind, name, namespace = _job_ref(job)
    reads = _Reads(live=port.get(api_version, kind, name, namespace))
    live = reads.live
    if live is None or not _needs_reading(job, live):
        return reads
    if api_version == vjobs.JOB_API_VERSION:
        meta = live.get("metadata") or {}
        if meta.get("uid"):
            reads.podgroup = port.get(vjobs.PODGROUP_API_VERSION, "PodGroup",
                                      vjobs.podgroup_name(meta["name"], meta["uid"]),
                                      meta.get("namespace"))
        queue_name = (live.get("spec") or {}).get("queue")
        if queue_name:
            reads.queue = port.get(vjobs.QUEUE_API_VERSION, "Queue", queue_name)
        return reads
    reads.workload = _workload_of(port, live, namespace)
    reads.events = port.list_events(namespace, name, kind)
    if reads.workload is not None:
        wl_name = reads.workload["metadata"]["name"]
        reads.events += port.list_events(namespace, wl_name, "Workload")
        if not (reads.workload.get("status") or {}).get("admission"):
            lq = _local_queue(live)
            reads.position = _position_in(
                _pending_or_none(port, namespace, lq) if lq else None, wl_name)
    return reads


def _needs_reading(job: Job, live: dict | None) -> bool:
    """False when there is nothing to read about the job: not created yet (``job_create``
    will) or over and gone."""
    return live is not None or (bool(job.cluster_uid) and not job.is_final)


def _interpret(job: Job, reads: _Reads, now: datetime):
    """``(JobStatus, partly_placed_since)`` from what was read (pure)."""
    if job.manifest["apiVersion"] == vjobs.JOB_API_VERSION:
        return _volcano_interpret(job, reads.live, reads.podgroup, reads.queue, now)
    known = [t for t in (qjobs.parse_time(v) for v in job.preemption_times or []) if t]
    return qjobs.interpret_kueue(
        job=reads.live, workload=reads.workload, events=reads.events,
        queue_position=reads.position, now=now,
        cancelled=job.cancel_requested_at is not None, known_preemption_times=known), None


def _store_status(job_id: int, live: dict | None, status, partly_since, now: datetime) -> str:
    """Write ``status`` (a :class:`queues.jobs.JobStatus`) on the job under its row lock;
    re-enqueue the cancel of a job being cancelled whose object still exists. Returns
    the phase."""
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
        job.partly_placed_since = partly_since
        job.status_synced_at = now
        job.last_error = ""
        if live is not None and not job.cluster_uid:  # created by a worker that died
            job.cluster_uid = (live.get("metadata") or {}).get("uid", "")
        job.save()
    if job.cancel_requested_at is not None and live is not None:
        _enqueue_on_commit("job_cancel_task", job_id)
    return job.phase


def job_sync(*, job_id: int, port=None, now: datetime | None = None) -> str | None:
    """Read job ``job_id``, its Workload, events and queue position; store the status.

    Reads (through the cluster port, :func:`_read_job`): the Job/JobSet, the
    namespace's Workloads, the events about the job and its Workload, and the
    LocalQueue's pending workloads from Kueue's visibility API (for the 0-based
    queue position). :func:`queues.jobs.interpret_kueue` turns them into the
    phase, reason, message, admitted flavor, preemptions and timeline;
    preemption times and timeline entries from earlier reads are kept (Kueue
    keeps only the latest condition). A Volcano job reads the vcjob, its
    PodGroup and its Queue (:func:`queues.volcano_jobs.interpret_volcano`); when
    the gang is partly placed, ``partly_placed_since`` keeps the time of the
    first such read (cleared once it is not). ``now``: aware ``datetime`` of the
    read (default the current time). Returns the new phase, or ``None`` when
    there is nothing to read (no manifest, or deleted on cancel). A job being
    cancelled whose object still exists gets its cancel re-enqueued
    (level-triggered). Raises :class:`TransientError` for the task to retry.
    The periodic :func:`jobs_sync` reads whole namespaces instead.
    """
    job = _load(job_id)
    if job is None or not job.manifest or job.deleted_at is not None:
        return None
    now = now or timezone.now()
    port = _port(job, port)
    try:
        reads = _read_job(port, job)
    except ClusterError as exc:
        Job.objects.filter(pk=job_id).update(last_error=str(exc)[:_MAX_ERROR])
        raise
    if not _needs_reading(job, reads.live):
        return job.phase  # not created yet (job_create will), or over and gone
    status, partly_since = _interpret(job, reads, now)
    return _store_status(job_id, reads.live, status, partly_since, now)


def _local_queue(live: dict) -> str:
    return ((live.get("metadata") or {}).get("labels") or {}).get(qjobs.QUEUE_NAME_LABEL) or ""


def _pending_or_none(port, namespace: str, local_queue: str) -> list[dict] | None:
    """The LocalQueue's pending workloads (visibility API), ``None`` when it answers 404
    (LocalQueue missing or the API not served: positions unknown, not an error)."""
    try:
        return port.pending_workloads(namespace, local_queue)
    except PermanentError as exc:
        if exc.status == 404:
            return None
        raise


def _position_in(pending: list[dict] | None, workload_name: str) -> int | None:
    """0-based position of ``workload_name`` among ``pending``, ``None`` if absent."""
    for index, item in enumerate(pending or ()):
        if (item.get("metadata") or {}).get("name") == workload_name:
            position = item.get("positionInLocalQueue")
            return int(position) if isinstance(position, int) else index
    return None


class _NamespaceListing:
    """One pass's reads of a namespace, shared by every job synced in it (:func:`jobs_sync`).

    Kueue: the portal's jobs of each kind present (one list per kind, selected by
    the portal's job labels), the Workloads (one list, indexed by owner uid with
    :func:`queues.jobs.index_workloads`), the events about jobs and about
    Workloads (one list per involved kind), and each LocalQueue's pending
    workloads (one read per LocalQueue, only when a job is not admitted).
    Volcano: the vcjobs (one list), the PodGroups (one list) and each Queue
    (one read per queue). The request count depends on the kinds present in the
    namespace, not on the number of jobs. A job with a uid missing from the
    listing (say its labels were edited) is read on its own before it is called
    gone. Raises :class:`queues.errors.ClusterError`.
    """

    def __init__(self, port, namespace: str, jobs: list[Job]) -> None:
        self.port, self.namespace = port, namespace
        kinds = sorted({(j.manifest["apiVersion"], j.manifest["kind"]) for j in jobs})
        selector = f"{managed_selector()},{KIND_LABEL}={KIND_JOB}"
        self.live: dict[tuple[str, str, str], dict] = {}
        for api_version, kind in kinds:
            for obj in port.list(api_version, kind, selector, namespace):
                self.live[(api_version, kind, obj["metadata"]["name"])] = obj
        kueue_kinds = [kind for api_version, kind in kinds if api_version != vjobs.JOB_API_VERSION]
        self.workloads: dict[str, dict] = {}
        self.events: dict[tuple[str, str], list[dict]] = {}
        if kueue_kinds:
            self.workloads = qjobs.index_workloads(port.list_workloads(namespace))
            for kind in [*kueue_kinds, "Workload"]:
                for event in port.list_events(namespace, involved_kind=kind):
                    involved = event.get("involvedObject") or {}
                    self.events.setdefault((kind, involved.get("name") or ""), []).append(event)
        self.podgroups: dict[str, dict] = {}
        if any(api_version == vjobs.JOB_API_VERSION for api_version, _ in kinds):
            self.podgroups = {pg["metadata"]["name"]: pg for pg in port.list(
                vjobs.PODGROUP_API_VERSION, "PodGroup", "", namespace)}
        self._pending: dict[str, list[dict] | None] = {}
        self._queues: dict[str, dict | None] = {}

    def reads(self, job: Job) -> _Reads:
        """The :class:`_Reads` of ``job`` from the listing (a read or two more at most per
        LocalQueue or Queue, cached)."""
        api_version, kind, name, _ = _job_ref(job)
        live = self.live.get((api_version, kind, name))
        if live is None and job.cluster_uid and not job.is_final:
            live = self.port.get(api_version, kind, name, self.namespace)
        reads = _Reads(live=live)
        if live is None or not _needs_reading(job, live):
            return reads
        meta = live.get("metadata") or {}
        if api_version == vjobs.JOB_API_VERSION:
            if meta.get("uid"):
                reads.podgroup = self.podgroups.get(vjobs.podgroup_name(name, meta["uid"]))
            queue_name = (live.get("spec") or {}).get("queue")
            if queue_name:
                if queue_name not in self._queues:
                    self._queues[queue_name] = self.port.get(vjobs.QUEUE_API_VERSION, "Queue",
                                                             queue_name)
                reads.queue = self._queues[queue_name]
            return reads
        reads.workload = (self.workloads.get(meta["uid"]) if meta.get("uid")
                          else qjobs.workload_for_job(list(self.workloads.values()), live))
        reads.events = list(self.events.get((kind, name), ()))
        if reads.workload is not None:
            wl_name = reads.workload["metadata"]["name"]
            reads.events += self.events.get(("Workload", wl_name), [])
            if not (reads.workload.get("status") or {}).get("admission"):
                lq = _local_queue(live)
                if lq and lq not in self._pending:
                    self._pending[lq] = _pending_or_none(self.port, self.namespace, lq)
                reads.position = _position_in(self._pending.get(lq), wl_name)
        return reads


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
    lost create or cancel task loses nothing). The others are read a
    namespace at a time (:class:`_NamespaceListing`): a fixed number of requests
    per namespace and pass whatever the number of jobs in it (Kueue, one job
    kind, a queued job: list the jobs, the Workloads, the events about jobs and
    about Workloads, the LocalQueue's pending workloads = 5 requests), then every
    job of the namespace is interpreted from the listing and stored as
    :func:`job_sync` would. One cluster port per cluster. A read that fails
    records ``last_error`` on the jobs it concerned, which are retried on the
    next run. Returns ``{"synced", "cancelled", "failed"}``.
    """
    now = now or timezone.now()
    ports: dict[int, object] = {}
    counts = {"synced": 0, "cancelled": 0, "failed": 0}
    cancelling = set(Job.objects.filter(cancel_requested_at__isnull=False,
                                        deleted_at__isnull=True).values_list("pk", flat=True))
    rows = (Job.objects.filter(pk__in=set(jobs_to_sync()) | cancelling)
            .select_related("team", "team__cluster", "flavor").order_by("pk"))
    namespaces: dict[tuple[int, str], list[Job]] = {}
    for job in rows:
        cluster = job.team.cluster
        try:
            if cluster.pk not in ports:
                ports[cluster.pk] = _port(job, None)
            if job.pk in cancelling:
                job_cancel_execute(job_id=job.pk, port=ports[cluster.pk])
                counts["cancelled"] += 1
            elif not job.manifest:
                counts["synced"] += 1  # nothing to read
            else:
                if not job.cluster_uid and job.phase == Job.Phase.SUBMITTED:
                    # Never seen on the cluster: its portal.job_create may have died with
                    # a worker (Redis gives an unacked task back only after an hour).
                    # job_create is idempotent: it creates only what is not there.
                    job_create(job_id=job.pk, port=ports[cluster.pk])
                namespaces.setdefault((cluster.pk, _job_ref(job)[3]), []).append(job)
        except ClusterError as exc:
            log.warning("sync of job %s failed: %s", job.pk, exc)
            counts["failed"] += 1
    for (cluster_id, namespace), jobs in namespaces.items():
        try:
            listing = _NamespaceListing(ports[cluster_id], namespace, jobs)
        except ClusterError as exc:
            log.warning("listing namespace %s failed: %s", namespace, exc)
            Job.objects.filter(pk__in=[j.pk for j in jobs]).update(
                last_error=str(exc)[:_MAX_ERROR])
            counts["failed"] += len(jobs)
            continue
        for job in jobs:
            try:
                reads = listing.reads(job)
            except ClusterError as exc:
                log.warning("sync of job %s failed: %s", job.pk, exc)
                Job.objects.filter(pk=job.pk).update(last_error=str(exc)[:_MAX_ERROR])
                counts["failed"] += 1
                continue
            if _needs_reading(job, reads.live):
                status, partly_since = _interpret(job, reads, now)
                _store_status(job.pk, reads.live, status, partly_since, now)
            counts["synced"] += 1
    return counts
