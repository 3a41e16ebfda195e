"""Gang jobs, the worker side: create on the cluster, cancel, and read their status back.

Run by Celery tasks (``portal.job_create``, ``portal.job_cancel``,
``portal.job_sync``, ``portal.jobs_sync``): idempotent, raising
:class:`queues.errors.TransientError` for the task to retry and recording
permanent failures on the job. What differs between schedulers (which objects
to read, how to stop a job, what the cluster's answer means) is the job's
backend's (:func:`portal.backends.backend_of_job`); this module keeps the rows.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime

from django.db import transaction
from django.utils import timezone

from portal.backends import backend_of_job, job_ref
from portal.models import Cluster, Job
from portal.services import reconcile as reconcile_services
from portal.services.audit import audit_record
from portal.services.outbox import task_enqueue
from queues import jobs as qjobs
from queues.errors import ClusterError, PermanentError, TransientError
from queues.render.labels import JOB_LABEL, KIND_JOB, KIND_LABEL, managed_selector

log = logging.getLogger(__name__)

_MAX_ERROR = 4000


def _port(job: Job | None, port, *, cluster: Cluster | None = None):
    if port is not None:
        return port
    return reconcile_services.cluster_port(cluster=cluster or job.team.cluster)


def _load(job_id: int) -> Job | None:
    return Job.objects.select_related("team", "team__cluster", "flavor").filter(pk=job_id).first()


def job_create(*, job_id: int, port=None) -> str:
    """Create job ``job_id``'s manifest on the cluster (``portal.job_create``).

    Returns ``"created"``, ``"exists"`` (already there: nothing written, so a
    job Kueue has since unsuspended is never suspended again), ``"cancelled"``
    (a cancel was recorded before the create ran or while it was in flight: the
    job is handed to :func:`job_cancel_execute`, which deletes whatever exists
    of it, so a create racing a cancel leaves nothing on the cluster),
    ``"skipped"`` (gone, final or no manifest), ``"waiting"`` (the team's namespace
    does not exist yet: the job stays ``Submitted`` with reason
    ``WaitingForNamespace`` and :func:`jobs_sync` creates it once the reconcile has
    made the namespace) or ``"failed"`` (another permanent error, recorded: phase
    ``Failed``, reason ``CreateFailed``). The cancel state is
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
    ref = job_ref(job)
    api_version, kind, name, namespace = ref.api_version, ref.kind, ref.name, ref.namespace
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
        if exc.status == 404 and namespace and _namespace_missing(port, namespace):
            # Submitted just after its quota was approved, before the reconcile made the
            # team's namespace: the job waits (jobs_sync creates it once it exists).
            Job.objects.filter(pk=job_id, phase=Job.Phase.SUBMITTED).update(
                reason=WAITING_FOR_NAMESPACE,
                message=f"Waiting for the team's queue to be set up on the cluster "
                        f"(namespace {namespace} does not exist yet); the job is created "
                        "as soon as it does.",
                last_error=str(exc)[:_MAX_ERROR])
            return "waiting"
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


#: The reason of a Submitted job whose team namespace the cluster does not have yet.
WAITING_FOR_NAMESPACE = "WaitingForNamespace"


def _namespace_missing(port, namespace: str) -> bool:
    """True when the cluster has no Namespace ``namespace`` (one GET; a failing read
    counts as not missing, so the refusal is recorded as it came)."""
    try:
        return port.get("v1", "Namespace", namespace) is None
    except ClusterError:
        return False


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
    ref = job_ref(job)
    port.delete_background(ref.api_version, ref.kind, ref.name, ref.namespace)
    if earlier is not None:
        Job.objects.filter(pk=earlier.pk, deleted_at__isnull=True).update(
            deleted_at=timezone.now())
    raise TransientError(f"deleting finished job {earlier_pk} named '{job.name}' from "
                         "the cluster before creating this one", reason="NameReused")


def _delete_leftover(port, job: Job) -> bool:
    """Delete the job's object if it exists and is this job's (its ``portal.gpu/job``
    label is ``job.pk``: a later job of the team may reuse the name). ``True`` if
    deleted. Raises :class:`queues.errors.ClusterError`."""
    ref = job_ref(job)
    api_version, kind, name, namespace = ref.api_version, ref.kind, ref.name, ref.namespace
    live = port.get(api_version, kind, name, namespace)
    labels = ((live or {}).get("metadata") or {}).get("labels") or {}
    if live is None or labels.get(JOB_LABEL) != str(job.pk):
        return False
    return port.delete_background(api_version, kind, name, namespace)


def job_cancel_execute(*, job_id: int, port=None) -> str:
    """One run of the job's cancel on the cluster (its backend's ``cancel``), then the row.

    Kueue deactivates the Workload (``spec.active: false``: Kueue evicts it and
    stops its pods), then deletes the job, in one run. Volcano sends an
    ``AbortJob`` Command while the vcjob runs (step ``"aborting"``: the job shows
    ``Cancelled``; ``portal.jobs_sync`` runs the cancel again for every job being
    cancelled), then, once it stopped, a ``TerminateJob`` and the delete. Once
    the job is deleted its phase becomes ``Cancelled`` - unless it had already
    finished, which the last status read decides. Returns the step
    (``"cancelled"``, ``"aborting"``) or ``"skipped"`` (nothing asked, or already
    done). Idempotent. Once done (``deleted_at`` set), a run still deletes
    whatever exists of the job (a create that was in flight during the cancel;
    see :func:`job_create`) and records it in the timeline and an audit event
    ``job.leftover_deleted``. Raises :class:`TransientError` for the task to retry.
    """
    job = _load(job_id)
    if job is None or job.cancel_requested_at is None:
        return "skipped"
    port = _port(job, port)
    if job.deleted_at is not None:
        return _cancel_leftover(job, port)
    try:
        step = backend_of_job(job).cancel(port, job_ref(job))
    except ClusterError as exc:
        Job.objects.filter(pk=job_id).update(last_error=str(exc)[:_MAX_ERROR])
        raise
    now = timezone.now()
    with transaction.atomic():
        job = Job.objects.select_for_update(of=("self",)).select_related("team").get(pk=job_id)
        before = job.phase
        job.timeline = _merge_timeline(list(job.timeline or []), [{
            "source": "Portal", "type": step.timeline_type, "status": "True",
            "reason": "Cancelled", "message": step.detail, "time": _rfc3339(now)}])
        if not job.is_final or (step.restates and job.phase == Job.Phase.CANCELLED):
            job.phase = Job.Phase.CANCELLED
            job.reason = "Cancelled"
            job.message = f"Cancelled on request: {step.detail}"
            job.finished_at = job.finished_at or now
        job.queue_position = None
        if step.done:
            job.deleted_at = now
        job.last_error = ""
        job.save()
        if step.done or before != Job.Phase.CANCELLED:
            audit_record(actor=None, action=f"job.{step.step}", target=job, team=job.team,
                         before={"phase": before}, after={"phase": job.phase})
    return step.step


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


def _read_job(port, job: Job) -> tuple[dict | None, object]:
    """Read one job from the cluster, request by request (:func:`job_sync`): the live
    object, then what its backend needs (:meth:`SchedulerBackend.read_job`; Kueue: the
    Workloads, the events, the queue position; Volcano: the PodGroup and the Queue).
    Returns ``(live, reads)``; ``reads`` is ``None`` when there is nothing more to read."""
    ref = job_ref(job)
    live = port.get(ref.api_version, ref.kind, ref.name, ref.namespace)
    if live is None or not _needs_reading(job, live):
        return live, None
    return live, backend_of_job(job).read_job(port, ref, live)


def _needs_reading(job: Job, live: dict | None) -> bool:
    """False when there is nothing to read about the job: not created yet (``job_create``
    will) or over and gone."""
    return live is not None or (bool(job.cluster_uid) and not job.is_final)


def _interpret(job: Job, live: dict | None, reads, now: datetime):
    """``(JobStatus, partly_placed_since)`` from what was read (pure): the backend's
    interpretation, given what the row remembers (preemption times, the partly-placed
    clock)."""
    known = [t for t in (qjobs.parse_time(v) for v in job.preemption_times or []) if t]
    return backend_of_job(job).interpret(
        reads, live=live, now=now, cancelled=job.cancel_requested_at is not None,
        known_preemption_times=known, partly_placed_since=job.partly_placed_since)


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
        task_enqueue("portal.job_cancel", job_id)
    return job.phase


def job_sync(*, job_id: int, port=None, now: datetime | None = None) -> str | None:
    """Read job ``job_id`` and what its backend needs; store the status.

    Reads (through the cluster port, :func:`_read_job`) the job, then its
    backend's ``read_job``: on Kueue the namespace's Workloads, the events about
    the job and its Workload, and the LocalQueue's pending workloads from Kueue's
    visibility API (for the 0-based queue position); on Volcano the vcjob's
    PodGroup and its Queue. The backend's ``interpret`` turns them into the
    phase, reason, message, admitted flavor, preemptions and timeline;
    preemption times and timeline entries from earlier reads are kept (Kueue
    keeps only the latest condition); when a Volcano gang is partly placed,
    ``partly_placed_since`` keeps the time of the first such read (cleared once
    it is not). ``now``: aware ``datetime`` of the
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
        live, reads = _read_job(port, job)
    except ClusterError as exc:
        Job.objects.filter(pk=job_id).update(last_error=str(exc)[:_MAX_ERROR])
        raise
    if not _needs_reading(job, live):
        return job.phase  # not created yet (job_create will), or over and gone
    status, partly_since = _interpret(job, live, reads, now)
    return _store_status(job_id, live, status, partly_since, now)


class _NamespaceListing:
    """One pass's reads of a namespace, shared by every job synced in it (:func:`jobs_sync`).

    The portal's jobs of each kind present (one list per kind, selected by the
    portal's job labels), then, for each backend whose jobs are there, its
    :meth:`SchedulerBackend.namespace_reader` (Kueue: the Workloads, the events
    about jobs and about Workloads, each LocalQueue's pending workloads; Volcano:
    the PodGroups and each Queue). The request count depends on the kinds present
    in the namespace, not on the number of jobs. A job with a uid missing from
    the listing (say its labels were edited) is read on its own before it is
    called gone. Raises :class:`queues.errors.ClusterError`.
    """

    def __init__(self, port, namespace: str, jobs: list[Job]) -> None:
        self.port, self.namespace = port, namespace
        kinds = sorted({(j.manifest["apiVersion"], j.manifest["kind"]) for j in jobs})
        selector = f"{managed_selector()},{KIND_LABEL}={KIND_JOB}"
        self.live: dict[tuple[str, str, str], dict] = {}
        for api_version, kind in kinds:
            for obj in port.list(api_version, kind, selector, namespace):
                self.live[(api_version, kind, obj["metadata"]["name"])] = obj
        by_backend: dict[str, tuple[object, list[str]]] = {}
        for job in sorted(jobs, key=lambda j: (j.manifest["apiVersion"], j.manifest["kind"])):
            backend = backend_of_job(job)
            kinds_of = by_backend.setdefault(backend.name, (backend, []))[1]
            if job.manifest["kind"] not in kinds_of:
                kinds_of.append(job.manifest["kind"])
        self.readers = {name: backend.namespace_reader(port, namespace, kinds_of)
                        for name, (backend, kinds_of) in by_backend.items()}

    def reads(self, job: Job) -> tuple[dict | None, object]:
        """``(live, reads)`` of ``job`` from the listing (a read or two more at most per
        LocalQueue or Queue, cached)."""
        ref = job_ref(job)
        live = self.live.get((ref.api_version, ref.kind, ref.name))
        if live is None and job.cluster_uid and not job.is_final:
            live = self.port.get(ref.api_version, ref.kind, ref.name, self.namespace)
        if live is None or not _needs_reading(job, live):
            return live, None
        return live, self.readers[backend_of_job(job).name].reads(ref, live)


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
                namespaces.setdefault((cluster.pk, job_ref(job).namespace), []).append(job)
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
                live, reads = listing.reads(job)
            except ClusterError as exc:
                log.warning("sync of job %s failed: %s", job.pk, exc)
                Job.objects.filter(pk=job.pk).update(last_error=str(exc)[:_MAX_ERROR])
                counts["failed"] += 1
                continue
            if _needs_reading(job, live):
                status, partly_since = _interpret(job, live, reads, now)
                _store_status(job.pk, live, status, partly_since, now)
            counts["synced"] += 1
    return counts
