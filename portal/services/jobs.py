"""Gang jobs, the intent side: check, submit, cancel, refresh (web requests).

Writes of intent (:func:`job_submit`, :func:`job_cancel`) validate first, write
in one transaction with an audit event, and enqueue the cluster work after
commit (:func:`portal.services.outbox.task_enqueue`). Nothing here reads or
writes the cluster: the worker side is :mod:`portal.services.job_runs`.

Field names in errors are the API's (``priority``, not ``priority_class``), so
the API, the form and the live validation show each error next to its field.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal

from django.conf import settings
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone

from portal import access
from portal.backends import backend_for
from portal.models import Cluster, GpuFlavor, Job, ManagedObject, PriorityClass, QuotaGrant, Team
from portal.selectors.quota import max_admissible_gpus
from portal.selectors.specs import cluster_specs, flavor_spec
from portal.services.audit import audit_record
from portal.services.fields import whole_count
from portal.services.images import registry_problem
from portal.services.outbox import task_enqueue
from queues import jobs as qjobs
from queues import quantity
from queues.specs import SpecError

log = logging.getLogger(__name__)

_MAX_ERROR = 4000

#: The submit fields, in form order (also the keys of every ValidationError raised here).
SUBMIT_FIELDS = ("team", "name", "image", "command", "args", "env", "workers",
                 "gpus_per_worker", "flavor", "cpu_per_worker", "memory_per_worker",
                 "priority", "kind", "max_runtime_seconds", "annotations")

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
    max_runtime_seconds=None, job_id: int = 0, annotations=None, sim_duration_seconds=None,
    sim_outcome="", sim_profile="",
) -> JobPlan:
    """Check a submission without writing anything; return the :class:`JobPlan`.

    ``flavor`` and ``priority`` are names (``priority`` ``None``/``""`` = none);
    ``command``/``args`` lists of strings; ``env`` a list of ``{name, value}``;
    ``workers``/``gpus_per_worker`` whole numbers >= 1 (``1.5`` refused, never
    rounded); ``cpu_per_worker``/``memory_per_worker`` quantities (empty = the
    flavor's per-GPU sizing times ``gpus_per_worker``); ``max_runtime_seconds``
    whole seconds or ``None``. ``annotations``: ``{key: value}`` put on the job's
    manifest, each key under a prefix of ``settings.JOB_ANNOTATION_PREFIXES`` (the
    demo and tests allow the simulated cluster's ``sim.portal.gpu/``).
    ``sim_duration_seconds`` / ``sim_outcome`` / ``sim_profile``: deprecated (one
    release) spellings of those simulator hints (:data:`DEPRECATED_SIM_FIELDS`),
    turned into the same annotations; the hints are checked either way and still
    fill the job's ``sim_*`` columns. Rules: the spec rules of
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
    notes = _annotations(annotations, fail)
    sim_columns = _sim_hints(notes, {"sim_duration_seconds": sim_duration_seconds,
                                     "sim_outcome": sim_outcome, "sim_profile": sim_profile},
                             fail)
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
            max_runtime_seconds=counts.get("max_runtime_seconds"), annotations=notes,
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
                "max_runtime_seconds": spec.max_runtime_seconds, **sim_columns},
    )


def _annotations(annotations, fail) -> dict:
    """``annotations`` (a mapping, or ``None``) whose keys this portal accepts
    (``settings.JOB_ANNOTATION_PREFIXES``); a refused key is an error on ``annotations``."""
    if annotations is None:
        return {}
    if not isinstance(annotations, Mapping):
        fail("annotations", "Must be an object of string keys and values.")
        return {}
    prefixes = tuple(settings.JOB_ANNOTATION_PREFIXES)
    for key in annotations:
        if not (isinstance(key, str) and key.startswith(prefixes) and key not in prefixes):
            allowed = ", ".join(prefixes) or "none"
            fail("annotations", f"'{key}' is not an annotation this portal accepts "
                                f"(allowed key prefixes: {allowed}).")
    return dict(annotations)


#: Deprecated (one release): the submit fields that spelled the simulated cluster's hints,
#: and the annotation each becomes. The simulator's own list is ``harness.sim.annotations``
#: (a test keeps the two equal); use ``annotations`` instead.
DEPRECATED_SIM_FIELDS = {
    "sim_duration_seconds": "sim.portal.gpu/duration-seconds",
    "sim_outcome": "sim.portal.gpu/outcome",
    "sim_profile": "sim.portal.gpu/profile",
}
_SIM_OUTCOMES = ("Succeeded", "Failed")
_SIM_PROFILES = ("training", "notebook", "inference")


def _sim_problem(field: str, value) -> str | None:
    """Why ``value`` of a simulator hint cannot be used (the rules of the deprecated fields)."""
    if field == "sim_duration_seconds":
        if isinstance(value, bool) or not isinstance(value, int):
            return f"must be a whole number of seconds, got {value!r}"
        if value < 1:
            return f"must be at least 1, got {value}"
        if value > 2**31 - 1:
            return f"must be at most {2**31 - 1}, got {value}"
        return None
    allowed = _SIM_OUTCOMES if field == "sim_outcome" else _SIM_PROFILES
    return None if value in allowed else f"must be one of {', '.join(allowed)}; got {value!r}"


def _sim_hints(notes: dict, given: dict, fail) -> dict:
    """Fold the deprecated ``sim_*`` fields (``given``) into the annotations ``notes`` (an
    annotation given as such wins) and check the simulator hints either way; returns the
    values of the deprecated ``sim_*`` columns, which still report them."""
    columns = {"sim_duration_seconds": None, "sim_outcome": "", "sim_profile": ""}
    for field, key in DEPRECATED_SIM_FIELDS.items():
        value, where = given.get(field), field
        if key in notes:
            value, where = notes[key], "annotations"
            if field == "sim_duration_seconds" and isinstance(value, str) and value.isdigit():
                value = int(value)
        if value is None or value == "":
            continue
        problem = _sim_problem(field, value)
        if problem:
            fail(where, problem if where == field else f"{key}: {problem}")
            continue
        columns[field] = value
        notes[key] = str(value)
    return columns


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
            task_enqueue("portal.job_create", job.pk)
    except IntegrityError as exc:  # a concurrent submit took the name
        raise ValidationError({"name": [f"Team '{team.slug}' already has a job named "
                                        f"'{fields.get('name')}'."]}) from exc
    except SpecError as exc:
        raise ValidationError({_api_field(exc.field): [_spec_message(exc)]}) from exc
    return job


def render_job(spec, *, cluster: Cluster, flavor: GpuFlavor) -> dict:
    """The manifest of a checked :class:`queues.jobs.JobSpec` for ``cluster``'s backend
    (:meth:`queues.backends.base.SchedulerBackend.render_job`: Kueue a suspended
    Job/JobSet, Volcano a vcjob with the flavor's node labels and tolerations).
    Raises :class:`queues.specs.SpecError`.
    """
    return backend_for(cluster).render_job(spec, flavor=flavor_spec(flavor))


def _queue_refusal(team: Team) -> str | None:
    """Why the team's queue refuses new jobs now (say a closed Volcano Queue), else ``None``.

    From the queue's state as the reconciler last observed it (its
    :class:`ManagedObject` row): no cluster read in a web request. Backends
    whose queues never refuse, a queue not observed yet (the reconciler will
    create it) are not refusals: the job is stored and created by the worker.
    """
    backend = backend_for(team.cluster)
    key = backend.team_queue(team.slug)
    if key is None:
        return None
    api_version, kind, namespace, name = key
    observed = (ManagedObject.objects.filter(
        cluster_id=team.cluster_id, api_version=api_version, kind=kind, namespace=namespace,
        name=name).values_list("observed", flat=True).first())
    return backend.queue_refusal(observed) if observed else None


def job_refresh(*, job: Job) -> None:
    """Ask a worker to read ``job``'s status from the cluster now (``portal.job_sync``)."""
    task_enqueue("portal.job_sync", job.pk)


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
        task_enqueue("portal.job_cancel", job.pk)
    return job


