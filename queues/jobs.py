"""Gang jobs, whatever the backend: the spec, the worker container, the status.

Pure: no Django, no ``kubernetes`` import (quantities go through
``queues.quantity``, image references through ``docker_image``). The portal
builds a :class:`JobSpec` from its Job row; the cluster's backend
(:mod:`queues.backends`) renders it and interprets what the cluster says about
it as a :class:`JobStatus`.

Public interface
----------------
* :class:`JobSpec` - frozen, validated on construction; a bad value raises
  ``queues.specs.SpecError(field, message)`` naming the field.
* :data:`FORBIDDEN_ENV` - environment variables a job may not set.
* :func:`pod_container` - the worker container both backends' templates use.
* :class:`JobStatus` - phase (:data:`PHASES`), stable reason code
  (:data:`REASONS`), plain-language message, timestamps, admitted flavor,
  preemptions, timeline.
* :func:`preemption_loop`, :func:`merge_times` - "preempted 3 or more times
  in 60 minutes"; :func:`parse_time` / :func:`format_time` - RFC 3339.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from docker_image.reference import InvalidReference, Reference

from queues import quantity
from queues.specs import (
    SpecError,
    _check_qualified_name,
    check_dns_label,
    check_extended_resource_name,
)

__all__ = [
    "FORBIDDEN_ENV",
    "KINDS",
    "MAX_NAME_LENGTH",
    "PHASES",
    "PREEMPTION_DEDUP_SECONDS",
    "REASONS",
    "JobSpec",
    "JobStatus",
    "format_time",
    "merge_times",
    "parse_time",
    "pod_container",
    "preemption_loop",
]


#: ``JobSpec.kind`` values: a single-role batch/v1 Indexed Job, or a JobSet.
KINDS = ("job", "jobset")
#: Name of the JobSet's one replicated job (and of the container in both kinds).
REPLICATED_JOB = "workers"
CONTAINER_NAME = "worker"

#: Longest job name. Pods of a JobSet are named and get the hostname
#: ``<name>-workers-0-<index>``, which must be a DNS-1123 label (<= 63); room is
#: kept for ``-workers-0-`` (11 characters) and a 5-digit worker index. The
#: same limit applies to both kinds so a name never depends on the kind.
MAX_NAME_LENGTH = 63 - len(f"-{REPLICATED_JOB}-0-") - 5

#: Environment variables a job may not set, because they change which devices a
#: container sees or what it may do with them, outside what the device plugin
#: allocated - i.e. they bypass quota or break per-pod metric attribution:
#:
#: * ``NVIDIA_VISIBLE_DEVICES`` - read by the NVIDIA container toolkit; ``all``
#:   exposes every GPU of the node to the container (quota bypass; DCGM
#:   attributes the GPUs to whichever pod the device plugin gave them to);
#: * ``CUDA_VISIBLE_DEVICES`` / ``GPU_DEVICE_ORDINAL`` / ``HIP_VISIBLE_DEVICES`` /
#:   ``ROCR_VISIBLE_DEVICES`` - re-map or hide allocated devices (utilization
#:   then no longer matches the allocation the portal reports);
#: * ``NVIDIA_DRIVER_CAPABILITIES`` / ``NVIDIA_REQUIRE_CUDA`` /
#:   ``NVIDIA_DISABLE_REQUIRE`` - change what the toolkit mounts and checks;
#: * ``NVIDIA_MIG_CONFIG_DEVICES`` / ``NVIDIA_MIG_MONITOR_DEVICES`` - MIG
#:   management and monitoring rights over the whole GPU (re-partitioning it);
#: * ``NVIDIA_IMEX_CHANNELS`` - NVLink IMEX channels outside the allocation.
#:
#: (NVIDIA container toolkit documentation, "Environment variables (OCI spec)".)
FORBIDDEN_ENV = frozenset({
    "NVIDIA_VISIBLE_DEVICES",
    "CUDA_VISIBLE_DEVICES",
    "GPU_DEVICE_ORDINAL",
    "HIP_VISIBLE_DEVICES",
    "ROCR_VISIBLE_DEVICES",
    "NVIDIA_DRIVER_CAPABILITIES",
    "NVIDIA_REQUIRE_CUDA",
    "NVIDIA_DISABLE_REQUIRE",
    "NVIDIA_MIG_CONFIG_DEVICES",
    "NVIDIA_MIG_MONITOR_DEVICES",
    "NVIDIA_IMEX_CHANNELS",
})

#: An environment variable name: the C identifier rule (POSIX portable names),
#: stricter than Kubernetes' own rule (which also allows ``-`` and ``.``), so
#: every name works in a shell.
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_MAX_ARGS = 256
_INT32_MAX = 2**31 - 1


def _check_annotations(value: Any, field: str = "annotations") -> tuple[tuple[str, str], ...]:
    pairs = list(value.items()) if isinstance(value, Mapping) else list(value or ())
    out = []
    for index, pair in enumerate(pairs):
        if not isinstance(pair, tuple | list) or len(pair) != 2:
            raise SpecError(f"{field}[{index}]", "must be a (key, value) pair")
        key, text = pair
        _check_qualified_name(key, f"{field}[{index}].key")
        if not isinstance(text, str):
            raise SpecError(f"{field}[{index}].value", f"must be a string, got {text!r}")
        out.append((key, text))
    if len({key for key, _ in out}) != len(out):
        raise SpecError(field, "keys must be unique")
    return tuple(sorted(out))


# --- the spec ------------------------------------------------------------------


def check_image(value: Any, field: str = "image") -> str:
    """Return ``value`` if it is a container image reference, else raise ``SpecError``.

    The grammar is distribution/reference's (``[host[:port]/]path[:tag][@digest]``,
    lowercase repository path, tag ``[\\w][\\w.-]{0,127}``, digest
    ``algorithm:hex``), as implemented by the ``docker-image-py`` package's
    ``Reference.parse_normalized_named`` (the same normalisation Docker and
    containerd apply: ``ubuntu`` means ``docker.io/library/ubuntu``). The
    string is kept as given; the runtime normalises it the same way.
    """
    if not isinstance(value, str) or not value.strip():
        raise SpecError(field, "must be a non-empty image reference such as 'ghcr.io/org/app:1.0'")
    if value != value.strip() or any(ch.isspace() for ch in value):
        raise SpecError(field, f"{value!r} must not contain whitespace")
    try:
        Reference.parse_normalized_named(value)
    except InvalidReference as exc:
        raise SpecError(field, f"{value!r} is not a valid image reference ({exc})") from None
    return value


def _check_strings(value: Any, field: str) -> tuple[str, ...]:
    if isinstance(value, str | bytes | Mapping) or not isinstance(value, Iterable):
        raise SpecError(field, f"must be a list of strings, got {value!r}")
    items = tuple(value)
    if len(items) > _MAX_ARGS:
        raise SpecError(field, f"at most {_MAX_ARGS} items")
    for index, item in enumerate(items):
        if not isinstance(item, str):
            raise SpecError(f"{field}[{index}]", f"must be a string, got {item!r}")
        if "\x00" in item:
            raise SpecError(f"{field}[{index}]", "must not contain NUL characters")
    return items


def _check_env(value: Any, field: str = "env") -> tuple[tuple[str, str], ...]:
    if isinstance(value, Mapping):
        value = tuple(value.items())
    if isinstance(value, str | bytes) or not isinstance(value, Iterable):
        raise SpecError(field, f"must be a list of (name, value) pairs, got {value!r}")
    out: list[tuple[str, str]] = []
    seen: set[str] = set()
    for index, item in enumerate(value):
        where = f"{field}[{index}]"
        if isinstance(item, Mapping):
            item = (item.get("name"), item.get("value", ""))
        if not isinstance(item, tuple | list) or len(item) != 2:
            raise SpecError(where, f"must be a (name, value) pair, got {item!r}")
        name, val = item
        if not isinstance(name, str) or not _ENV_NAME.match(name):
            raise SpecError(
                where,
                f"{name!r} is not a valid variable name (letters, digits and '_', "
                "not starting with a digit)",
            )
        if name in FORBIDDEN_ENV:
            raise SpecError(
                where,
                f"{name} may not be set: it changes which GPUs the container sees, "
                "bypassing quota and GPU metric attribution",
            )
        if name in seen:
            raise SpecError(where, f"{name} is set twice")
        seen.add(name)
        if not isinstance(val, str):
            raise SpecError(where, f"the value of {name} must be a string, got {val!r}")
        out.append((name, val))
    return tuple(out)


def _check_positive_int(value: Any, field: str, what: str, *, maximum: int = _INT32_MAX) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise SpecError(field, f"must be a whole number of {what}, got {value!r}")
    if value < 1:
        raise SpecError(field, f"must be at least 1, got {value}")
    if value > maximum:
        raise SpecError(field, f"must be at most {maximum}, got {value}")
    return value


def _check_positive_quantity(value: Any, field: str) -> str:
    try:
        parsed = quantity.parse(value)
    except ValueError as exc:
        raise SpecError(field, str(exc)) from None
    if parsed <= 0:
        raise SpecError(field, f"must be greater than 0, got {value!r}")
    return value


@dataclass(frozen=True, slots=True, kw_only=True)
class JobSpec:
    """A gang job as the portal submits it to Kueue.

    * ``namespace``: the team namespace (= team slug, also the team label).
    * ``name``: DNS-1123 label starting with a letter, at most
      :data:`MAX_NAME_LENGTH` (47) characters (room for the pod suffixes; the
      JobSet's headless Service also needs a leading letter).
    * ``image``: container image reference (:func:`check_image`).
    * ``command`` / ``args``: tuples of strings (any sequence accepted, stored
      as a tuple); empty ``command`` keeps the image's entrypoint.
    * ``env``: tuple of ``(name, value)`` pairs (a mapping or a list of
      ``{"name", "value"}`` dicts is accepted); names follow the C identifier
      rule, are unique, and none is in :data:`FORBIDDEN_ENV`.
    * ``workers``: pods in the gang (int >= 1); ``gpus_per_worker``: whole
      devices of ``gpu_resource`` per pod (int >= 1; ``0.5``, ``"1.5"``,
      ``True`` are refused, never rounded). Total GPUs = ``workers *
      gpus_per_worker`` (:attr:`total_gpus`).
    * ``gpu_resource``: extended resource, ``nvidia.com/gpu`` or a MIG profile
      ``nvidia.com/mig-1g.10gb``; ``flavor``: the ResourceFlavor name the team
      holds quota on (informative here: Kueue chooses the flavor among the
      ClusterQueue's; see :func:`render_kueue_job`).
    * ``cpu_per_worker`` / ``memory_per_worker``: Kubernetes quantity strings
      (cores, bytes), > 0. Required: the team ResourceQuota caps
      ``requests.cpu``/``requests.memory``, so every pod must state both.
    * ``priority_class``: WorkloadPriorityClass name or ``""`` (queue default).
    * ``kind``: ``"job"`` or ``"jobset"`` (:data:`KINDS`).
    * ``max_runtime_seconds``: ``None`` or int >= 1 (``activeDeadlineSeconds``).
    * ``local_queue``: the team's LocalQueue (DNS-1123 label).
    * ``job_label``: the portal's job id as a label value (``portal.gpu/job``).
    * ``annotations``: ``(key, value)`` pairs put on the top object's
      ``metadata.annotations`` (a mapping is accepted; keys are qualified names,
      values strings); empty = no annotations. (The demo's simulated cluster reads
      its hints from ``sim.portal.gpu/*`` annotations.)

    Raises ``SpecError(field, message)`` for the first bad field.
    """

    namespace: str
    name: str
    image: str
    workers: int
    gpus_per_worker: int
    gpu_resource: str
    flavor: str
    cpu_per_worker: str
    memory_per_worker: str
    local_queue: str
    job_label: str
    command: tuple[str, ...] = ()
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = field(default=())
    priority_class: str = ""
    kind: str = "job"
    max_runtime_seconds: int | None = None
    annotations: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        check_dns_label(self.namespace, "namespace")
        check_dns_label(self.name, "name")
        if len(self.name) > MAX_NAME_LENGTH:
            raise SpecError(
                "name",
                f"must be at most {MAX_NAME_LENGTH} characters (pod names add a suffix), "
                f"got {len(self.name)}",
            )
        if not self.name[0].isalpha():
            raise SpecError("name", f"{self.name!r} must start with a letter")
        check_image(self.image, "image")
        object.__setattr__(self, "command", _check_strings(self.command, "command"))
        object.__setattr__(self, "args", _check_strings(self.args, "args"))
        object.__setattr__(self, "env", _check_env(self.env, "env"))
        _check_positive_int(self.workers, "workers", "workers", maximum=10_000)
        _check_positive_int(self.gpus_per_worker, "gpus_per_worker", "GPUs", maximum=1024)
        check_extended_resource_name(self.gpu_resource, "gpu_resource")
        check_dns_label(self.flavor, "flavor")
        _check_positive_quantity(self.cpu_per_worker, "cpu_per_worker")
        _check_positive_quantity(self.memory_per_worker, "memory_per_worker")
        if self.priority_class:
            check_dns_label(self.priority_class, "priority_class")
        elif self.priority_class != "":
            raise SpecError("priority_class", "must be a name or ''")
        if self.kind not in KINDS:
            raise SpecError("kind", f"must be one of {', '.join(KINDS)}; got {self.kind!r}")
        if self.max_runtime_seconds is not None:
            _check_positive_int(self.max_runtime_seconds, "max_runtime_seconds", "seconds")
        check_dns_label(self.local_queue, "local_queue")
        if (
            not isinstance(self.job_label, str)
            or not self.job_label
            or len(self.job_label) > 63
            or not _LABEL_VALUE.match(self.job_label)
        ):
            raise SpecError("job_label", f"{self.job_label!r} is not a valid label value")
        object.__setattr__(self, "annotations", _check_annotations(self.annotations))

    @property
    def total_gpus(self) -> int:
        """GPUs (devices of ``gpu_resource``) the gang needs at once: workers x GPUs per worker."""
        return self.workers * self.gpus_per_worker

    @property
    def team(self) -> str:
        """The team slug (= ``namespace``)."""
        return self.namespace



# --- status --------------------------------------------------------------------

#: Job phases, in lifecycle order.
PHASES = ("Submitted", "Queued", "Admitted", "Running", "Succeeded", "Failed", "Cancelled")

#: Stable reason codes of :class:`JobStatus` (phase in brackets).
REASONS = {
    "NotOnCluster": "[Submitted] the job is not on the cluster (yet)",
    "WaitingForKueue": "[Submitted] the job exists; Kueue has not created its Workload yet",
    "PendingEvaluation": "[Queued] waiting for Kueue to consider it",
    "WaitingForQuota": "[Queued] not enough unused quota now; N more GPUs needed",
    "ExceedsMaximum": "[Queued] larger than the queue can ever be admitted",
    "NoMatchingFlavor": "[Queued] no flavor of the queue fits the job",
    "QueueInactive": "[Queued] the ClusterQueue or LocalQueue is inactive or stopped",
    "QueueNotFound": "[Queued] the LocalQueue does not exist",
    "PendingPreemption": "[Queued] waiting for N preempted workloads to leave",
    "Preempted": "[Queued] preempted and requeued",
    "Evicted": "[Queued] evicted (other than preemption) and requeued",
    "AdmissionChecksPending": "[Queued] quota reserved, admission checks pending",
    "Inadmissible": "[Queued] Kueue cannot admit it (see message)",
    "Admitted": "[Admitted] admitted; pods starting",
    "NamespaceQuotaExceeded": "[Admitted] admitted, but the namespace ResourceQuota refuses pods",
    "PodsFailedToCreate": "[Admitted] admitted, but the pods could not be created",
    "Running": "[Running] pods running",
    "Succeeded": "[Succeeded] every worker completed",
    "Failed": "[Failed] a worker failed",
    "MaxRuntimeExceeded": "[Failed] stopped at the maximum runtime",
    "Deactivated": "[Failed] Kueue deactivated the Workload (requeue or time limit)",
    "Cancelled": "[Cancelled] cancelled through the portal",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class JobStatus:
    """What the portal shows about a job, derived from the cluster.

    * ``phase``: one of :data:`PHASES`; ``reason``: a code of :data:`REASONS`;
      ``message``: one or two plain sentences for the team.
    * ``admitted_flavor``: ResourceFlavor of the GPU resource in
      ``status.admission`` (``None`` if never admitted); ``cluster_queue``.
    * ``submitted_at`` (job creation), ``admitted_at`` (Admitted condition),
      ``started_at`` (job ``startTime`` or PodsReady), ``finished_at``:
      timezone-aware ``datetime`` or ``None``.
    * ``queue_position``: 0-based position from Kueue's visibility API
      (0 = next), as given; ``None`` when not pending.
    * ``preemptions``: times preempted (``schedulingStats.evictions`` with
      reason ``Preempted``, or at least the visible preemption times);
      ``preemptor``: the JobUID (else the Workload UID) of the latest
      preemptor, ``""`` if unknown; ``preemption_times``: the visible
      preemption instants (tuple of ``datetime``, signals of one preemption
      less than :data:`PREEMPTION_DEDUP_SECONDS` apart counted once; pass the
      stored ones back as ``known_preemption_times``); ``preemption_loop``:
      :func:`preemption_loop` over them.
    * ``timeline``: tuple of dicts ``{"source", "type", "status", "reason",
      "message", "time"}`` (``time`` an RFC 3339 string or ``""``), sorted by
      time: Workload conditions (source ``"Workload"``), Job/JobSet conditions
      (``"Job"``), events (``"Event"``; ``type`` = ``Normal``/``Warning``).
    """

    phase: str
    reason: str
    message: str
    admitted_flavor: str | None = None
    cluster_queue: str | None = None
    submitted_at: dt.datetime | None = None
    admitted_at: dt.datetime | None = None
    started_at: dt.datetime | None = None
    finished_at: dt.datetime | None = None
    queue_position: int | None = None
    preemptions: int = 0
    preemptor: str = ""
    preemption_times: tuple[dt.datetime, ...] = ()
    preemption_loop: bool = False
    timeline: tuple[dict, ...] = ()

    @property
    def is_final(self) -> bool:
        """True for Succeeded, Failed, Cancelled: nothing on the cluster will change it."""
        return self.phase in ("Succeeded", "Failed", "Cancelled")


def parse_time(value: Any) -> dt.datetime | None:
    """RFC 3339 string (``2026-01-02T03:04:05Z``, fractions allowed) -> aware ``datetime``."""
    if isinstance(value, dt.datetime):
        return value if value.tzinfo else value.replace(tzinfo=dt.UTC)
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.UTC)


def format_time(value: dt.datetime | None) -> str:
    """Aware ``datetime`` -> RFC 3339 (``2026-01-02T03:04:05Z``); ``""`` for ``None``."""
    if value is None:
        return ""
    return value.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


#: Signals of one preemption (the ``Evicted`` and ``Preempted`` conditions, the
#: ``Preempted`` event) are written a moment apart and may straddle a second;
#: instants closer than this are one preemption (a Workload must be re-admitted
#: before it can be preempted again, which takes longer).
PREEMPTION_DEDUP_SECONDS = 10


def merge_times(*groups: Iterable[dt.datetime | str],
                tolerance_seconds: float = 0) -> tuple[dt.datetime, ...]:
    """Sorted union of instants (datetimes or RFC 3339 strings); an instant within
    ``tolerance_seconds`` after the previous kept one is dropped as a duplicate
    (0 = only identical instants)."""
    seen = sorted({t for t in (parse_time(v) for group in groups for v in group) if t})
    kept: list[dt.datetime] = []
    for when in seen:
        if not kept or (when - kept[-1]).total_seconds() > tolerance_seconds:
            kept.append(when)
    return tuple(kept)


def preemption_loop(times: Iterable[dt.datetime], now: dt.datetime, window_seconds: int = 3600,
                    threshold: int = 3) -> bool:
    """True when ``threshold`` or more preemptions fall within ``window_seconds`` before ``now``.

    ``times``: preemption instants (aware datetimes); a time in the future
    of ``now`` counts as inside the window. Default: 3 in 60 minutes (the
    issue's definition of a preemption loop).
    """
    start = now - dt.timedelta(seconds=window_seconds)
    return sum(1 for t in merge_times(times) if t >= start) >= threshold


# --- the worker container (both backends) ----------------------------------------


def pod_container(spec: JobSpec) -> dict:
    """The worker container of ``spec`` (both backends): image, command, args,
    env; requests cpu, memory and ``gpus_per_worker`` of ``gpu_resource``,
    limits = requests for GPUs and memory."""
    requests = {
        "cpu": spec.cpu_per_worker,
        "memory": spec.memory_per_worker,
        spec.gpu_resource: str(spec.gpus_per_worker),
    }
    limits = {spec.gpu_resource: str(spec.gpus_per_worker), "memory": spec.memory_per_worker}
    container: dict[str, Any] = {"name": CONTAINER_NAME, "image": spec.image}
    if spec.command:
        container["command"] = list(spec.command)
    if spec.args:
        container["args"] = list(spec.args)
    if spec.env:
        container["env"] = [{"name": name, "value": value} for name, value in spec.env]
    container["resources"] = {"requests": requests, "limits": limits}
    return container
