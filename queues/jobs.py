"""Gang jobs for Kueue: the spec, the manifest, and what the cluster says about it.

Pure: no Django, no ``kubernetes`` import (quantities go through
``queues.quantity``, image references through ``docker_image``). The portal
builds a :class:`JobSpec` from its Job row, applies :func:`render_kueue_job`
through ``queues.cluster``, and on every sync feeds what it reads back (the
Job/JobSet, its Kueue ``Workload``, events, the visibility API's queue
position) to :func:`interpret_kueue`, which returns a :class:`JobStatus`.

Public interface
----------------
* :class:`JobSpec` - frozen, validated on construction; a bad value raises
  ``queues.specs.SpecError(field, message)`` naming the field.
* :data:`FORBIDDEN_ENV` - environment variables a job may not set.
* :func:`render_kueue_job` - ``JobSpec`` -> batch/v1 Indexed Job or
  jobset.x-k8s.io/v1alpha2 JobSet manifest (dict), suspended, for Kueue.
* :func:`job_kind` - ``(apiVersion, kind)`` of the manifest of a spec kind.
* :class:`JobStatus`, :func:`interpret_kueue` - phase (:data:`PHASES`),
  stable reason code (:data:`REASONS`), plain-language message, timestamps,
  admitted flavor, preemptions, timeline.
* :func:`preemption_loop`, :func:`merge_times` - "preempted 3 or more times
  in 60 minutes"; :func:`parse_time` - RFC 3339 string -> aware ``datetime``.
* :func:`workload_for_job`, :func:`workload_name` - find (or predict the
  name of) the Workload Kueue creates for a job.

Kueue conventions relied on (kueue.x-k8s.io/v1beta2; Kueue source
``pkg/controller/jobframework/workload_names.go``,
``pkg/scheduler/flavorassigner/flavorassigner.go``,
``pkg/scheduler/preemption/preemption.go``, ``apis/kueue/v1beta2/workload_types.go``):

* the Workload of a Job ``train`` is named ``job-train-<5 hex>`` (JobSet:
  ``jobset-train-<5 hex>``), owned by the job (``ownerReferences[].uid``) and
  labelled ``kueue.x-k8s.io/job-uid: <job uid>``;
* ``QuotaReserved=False`` carries a reason (``WaitingForQuota``,
  ``ExceedsMaxQuota``, ``NoMatchingFlavor``, ``WaitingForPreemptedWorkloads``,
  ``Suspended``, ``Misconfigured``, ``PendingEvaluation``; older releases
  ``Pending``) and a message such as ``couldn't assign flavors to pod set
  main: insufficient unused quota for nvidia.com/gpu in flavor h100, 16 more
  needed``; both are read, the message wins where it is more specific;
* a preempted Workload gets ``Evicted`` (reason ``Preempted``) and
  ``Preempted`` (reason ``InClusterQueue``, ``InCohortReclamation``,
  ``InCohortFairSharing``, ``InCohortReclaimWhileBorrowing``) with the message
  ``Preempted to accommodate a workload (UID: <wl uid>, JobUID: <job uid>) due
  to <why>; ...``; ``status.schedulingStats.evictions`` counts evictions by
  reason.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from docker_image.reference import InvalidReference, Reference

from queues import quantity
from queues.render.labels import job_labels
from queues.specs import (
    SpecError,
    _check_qualified_name,
    check_dns_label,
    check_extended_resource_name,
)

__all__ = [
    "FORBIDDEN_ENV",
    "JOBSET_API_VERSION",
    "JOB_UID_LABEL",
    "JOB_API_VERSION",
    "KINDS",
    "MAX_NAME_LENGTH",
    "PHASES",
    "PREEMPTION_DEDUP_SECONDS",
    "PRIORITY_CLASS_LABEL",
    "QUEUE_NAME_LABEL",
    "REASONS",
    "SIM_DURATION_ANNOTATION",
    "SIM_OUTCOME_ANNOTATION",
    "SIM_PROFILE_ANNOTATION",
    "JobSpec",
    "JobStatus",
    "interpret_kueue",
    "job_kind",
    "merge_times",
    "parse_time",
    "pod_container",
    "preemption_loop",
    "render_kueue_job",
    "sim_annotations",
    "workload_for_job",
    "workload_name",
]

JOB_API_VERSION = "batch/v1"
JOBSET_API_VERSION = "jobset.x-k8s.io/v1alpha2"
#: Kueue's labels on a job: the LocalQueue, the WorkloadPriorityClass, the job UID.
QUEUE_NAME_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_CLASS_LABEL = "kueue.x-k8s.io/priority-class"
JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"

#: Annotations a simulated cluster reads (``queues.sim.controller``), ignored by Kueue
#: and Volcano: how long the job runs once started (whole seconds), how it ends
#: (``Succeeded``/``Failed``) and its GPU activity profile for the simulated DCGM
#: exporter (``training``, ``notebook``, ``inference``). Set only for demo and
#: replay jobs (:func:`sim_annotations`).
SIM_DURATION_ANNOTATION = "sim.portal.gpu/duration-seconds"
SIM_OUTCOME_ANNOTATION = "sim.portal.gpu/outcome"
SIM_PROFILE_ANNOTATION = "sim.portal.gpu/profile"
SIM_OUTCOMES = ("Succeeded", "Failed")
SIM_PROFILES = ("training", "notebook", "inference")

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


def sim_annotations(*, duration_seconds: int | None = None, outcome: str = "",
                    profile: str = "") -> tuple[tuple[str, str], ...]:
    """The ``sim.portal.gpu/*`` annotations for a job's declared running time
    (whole seconds >= 1), outcome (:data:`SIM_OUTCOMES`) and activity profile
    (:data:`SIM_PROFILES`); only those given. Raises ``SpecError`` naming
    ``sim_duration_seconds``, ``sim_outcome`` or ``sim_profile``."""
    out = []
    if duration_seconds is not None:
        _check_positive_int(duration_seconds, "sim_duration_seconds", "seconds")
        out.append((SIM_DURATION_ANNOTATION, str(duration_seconds)))
    if outcome:
        if outcome not in SIM_OUTCOMES:
            raise SpecError("sim_outcome", f"must be one of {', '.join(SIM_OUTCOMES)}; "
                                           f"got {outcome!r}")
        out.append((SIM_OUTCOME_ANNOTATION, outcome))
    if profile:
        if profile not in SIM_PROFILES:
            raise SpecError("sim_profile", f"must be one of {', '.join(SIM_PROFILES)}; "
                                           f"got {profile!r}")
        out.append((SIM_PROFILE_ANNOTATION, profile))
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
      values strings); empty = no annotations. Used for the ``sim.portal.gpu/*``
      annotations of :func:`sim_annotations`.

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


# --- rendering -----------------------------------------------------------------


def job_kind(kind: str) -> tuple[str, str]:
    """``(apiVersion, kind)`` of the manifest for ``JobSpec.kind`` ``"job"``/``"jobset"``.

    Raises ``ValueError`` for another value.
    """
    if kind == "job":
        return JOB_API_VERSION, "Job"
    if kind == "jobset":
        return JOBSET_API_VERSION, "JobSet"
    raise ValueError(f"unknown job kind {kind!r}")


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


def _pod_template(spec: JobSpec) -> dict:
    return {
        "metadata": {"labels": job_labels(spec.team, spec.job_label)},
        "spec": {"restartPolicy": "Never", "containers": [pod_container(spec)]},
    }


def _indexed_job_spec(spec: JobSpec) -> dict:
    out: dict[str, Any] = {
        "parallelism": spec.workers,
        "completions": spec.workers,
        "completionMode": "Indexed",
        "backoffLimit": 0,
    }
    if spec.max_runtime_seconds is not None:
        out["activeDeadlineSeconds"] = spec.max_runtime_seconds
    out["template"] = _pod_template(spec)
    return out


def render_kueue_job(spec: JobSpec) -> dict:
    """The manifest Kueue admits as one gang: a batch/v1 Job or a JobSet (dict).

    ``kind="job"``: ``batch/v1`` Job, ``completionMode: Indexed``,
    ``parallelism = completions = workers`` (pods get
    ``JOB_COMPLETION_INDEX``). ``kind="jobset"``: ``jobset.x-k8s.io/v1alpha2``
    JobSet with one replicated job ``workers`` (``replicas: 1``, an Indexed
    Job of ``workers`` pods: total pods = workers) and
    ``network.enableDNSHostnames: true``: the JobSet controller creates a
    headless Service named after the JobSet, and worker ``i`` is reachable at
    ``<name>-workers-0-<i>.<name>`` (rank 0 is the usual rendezvous address).

    Both carry, on the top object: ``kueue.x-k8s.io/queue-name: <local_queue>``,
    ``kueue.x-k8s.io/priority-class: <priority_class>`` (only when set), the
    portal's ``job_labels(team, job_label)``; ``metadata.annotations`` =
    ``spec.annotations`` when there are any; ``spec.suspend: true`` (Kueue
    unsuspends it on admission). Pods carry the portal labels too. Each
    container requests ``cpu_per_worker``, ``memory_per_worker`` and
    ``gpus_per_worker`` of ``gpu_resource``; GPU limits equal requests
    (extended resources cannot be overcommitted), memory limit = request (a
    worker that leaks memory is killed alone instead of squeezing its node's
    other jobs), no CPU limit (no CFS throttling of data loaders).

    Choices:

    * ``restartPolicy: Never`` and ``backoffLimit: 0`` (JobSet also
      ``failurePolicy.maxRestarts: 0``): a gang whose worker fails is broken
      (the collective hangs or aborts), so the job fails at once and is
      reported, instead of restarting one pod into a half-dead gang and
      holding GPUs meanwhile.
    * ``activeDeadlineSeconds = max_runtime_seconds`` (on the Job, or on the
      JobSet's child Job): the clock starts when Kueue resumes the job, not
      while it waits (Kubernetes resets ``startTime`` on suspend).
    * No nodeSelector or tolerations: Kueue injects the admitted
      ResourceFlavor's ``nodeLabels`` and ``tolerations`` into the pod
      template when it unsuspends the job; setting them here would pin the
      job to one flavor and could contradict Kueue's choice.
    """
    labels = {QUEUE_NAME_LABEL: spec.local_queue}
    if spec.priority_class:
        labels[PRIORITY_CLASS_LABEL] = spec.priority_class
    labels.update(job_labels(spec.team, spec.job_label))
    api_version, kind = job_kind(spec.kind)
    metadata = {"name": spec.name, "namespace": spec.namespace, "labels": labels}
    if spec.annotations:
        metadata["annotations"] = dict(spec.annotations)
    if spec.kind == "job":
        body = {"suspend": True, **_indexed_job_spec(spec)}
    else:
        body = {
            "suspend": True,
            "network": {"enableDNSHostnames": True},
            "failurePolicy": {"maxRestarts": 0},
            "replicatedJobs": [{
                "name": REPLICATED_JOB,
                "replicas": 1,
                "template": {
                    "metadata": {"labels": job_labels(spec.team, spec.job_label)},
                    "spec": _indexed_job_spec(spec),
                },
            }],
        }
    return {"apiVersion": api_version, "kind": kind, "metadata": metadata, "spec": body}


# --- finding the Workload ------------------------------------------------------


def workload_name(kind: str, job_name: str, job_uid: str, *, max_length: int = 253) -> str:
    """The name Kueue gives the Workload of a job: ``<kind>-<name>-<hash5>``.

    ``kind`` is the object kind (``"Job"``/``"JobSet"``, or the spec's
    ``"job"``/``"jobset"``). Formula from Kueue
    ``jobframework.GetWorkloadNameForOwnerWithGVK``: prefix
    ``lower(kind) + "-" + name`` truncated to ``max_length - 6``, then ``-``
    and the first 5 hex digits of ``sha1(kind "\\n" group "\\n" name "\\n" uid)``.
    ``max_length`` is 253, or 63 with Kueue's ``ShortWorkloadNames`` feature.
    """
    kinds = {"job": ("Job", "batch"), "jobset": ("JobSet", "jobset.x-k8s.io")}
    gvk_kind, group = kinds.get(kind.lower(), (kind, ""))
    digest = hashlib.sha1(
        "\n".join((gvk_kind, group, job_name, job_uid)).encode(), usedforsecurity=False
    ).hexdigest()
    prefix = f"{gvk_kind.lower()}-{job_name}"[: max_length - 6]
    return f"{prefix}-{digest[:5]}"


def index_workloads(workloads: Sequence[dict]) -> dict[str, dict]:
    """``{job uid: Workload}`` over ``workloads`` (one pass), for reading many jobs of a
    namespace from one listing.

    Keyed by every ``ownerReferences[].uid`` and the ``kueue.x-k8s.io/job-uid``
    label of each Workload; for a uid with several Workloads (a re-created one),
    the newest by ``creationTimestamp``, as :func:`workload_for_job` picks. A
    job with no uid is looked up with :func:`workload_for_job` instead.
    """
    index: dict[str, dict] = {}
    for wl in workloads:
        wmeta = wl.get("metadata") or {}
        uids = {ref.get("uid") for ref in wmeta.get("ownerReferences") or ()}
        uids.add((wmeta.get("labels") or {}).get(JOB_UID_LABEL))
        created = wmeta.get("creationTimestamp") or ""
        for uid in uids - {None, ""}:
            known = index.get(uid)
            if known is None or created > ((known.get("metadata") or {})
                                           .get("creationTimestamp") or ""):
                index[uid] = wl
    return index


def workload_for_job(workloads: Sequence[dict], job: dict) -> dict | None:
    """The Workload (dict) among ``workloads`` that Kueue created for ``job``, or ``None``.

    Matched on the job's ``metadata.uid`` through ``ownerReferences[].uid`` or
    the ``kueue.x-k8s.io/job-uid`` label; when the job carries no uid, on the
    name prefix ``<kind>-<name>-``. Several matches (a re-created Workload):
    the newest by ``creationTimestamp``.
    """
    meta = job.get("metadata") or {}
    uid = meta.get("uid") or ""
    name = meta.get("name") or ""
    kind = (job.get("kind") or "Job").lower()
    matches = []
    for wl in workloads:
        wmeta = wl.get("metadata") or {}
        if uid:
            owners = {ref.get("uid") for ref in wmeta.get("ownerReferences") or ()}
            if uid in owners or (wmeta.get("labels") or {}).get(JOB_UID_LABEL) == uid:
                matches.append(wl)
        elif re.fullmatch(rf"{re.escape(kind)}-{re.escape(name)}-[0-9a-f]{{5}}",
                          wmeta.get("name") or ""):
            matches.append(wl)
    if not matches:
        return None
    return max(matches, key=lambda w: (w.get("metadata") or {}).get("creationTimestamp") or "")


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


def _format_time(value: dt.datetime | None) -> str:
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


def _conditions(obj: dict | None) -> dict[str, dict]:
    out = {}
    for cond in ((obj or {}).get("status") or {}).get("conditions") or ():
        if isinstance(cond, dict) and cond.get("type"):
            out[cond["type"]] = cond
    return out


def _is_true(conds: dict[str, dict], kind: str) -> bool:
    return (conds.get(kind) or {}).get("status") == "True"


def _event_time(event: dict) -> dt.datetime | None:
    series = event.get("series") or {}
    return (
        parse_time(series.get("lastObservedTime"))
        or parse_time(event.get("lastTimestamp"))
        or parse_time(event.get("eventTime"))
        or parse_time(event.get("firstTimestamp"))
        or parse_time((event.get("metadata") or {}).get("creationTimestamp"))
    )


# Kueue message formats (see the module docstring for the source files).
_UNUSED_QUOTA = re.compile(
    r"insufficient unused quota for (?P<resource>\S+) in flavor (?P<flavor>\S+), "
    r"(?P<more>\S+) more needed"
)
_MAX_CAPACITY_NEW = re.compile(
    r"insufficient quota for (?P<resource>\S+) in flavor (?P<flavor>\S+), previously considered "
    r"podsets requests \((?P<previous>[^)]*)\) \+ current podset request \((?P<request>[^)]*)\) "
    r"> maximum capacity \((?P<maximum>[^)]*)\)"
)
_MAX_CAPACITY_OLD = re.compile(
    r"insufficient quota for (?P<resource>\S+) in flavor (?P<flavor>\S+), "
    r"request > maximum capacity \((?P<request>\S+) > (?P<maximum>[^)]+)\)"
)
_PENDING_PREEMPTION = re.compile(r"Pending the preemption of (?P<count>\d+) workload")
_PREEMPTED_BY = re.compile(
    r"Preempted to accommodate a workload \(UID: (?P<uid>[^,]*), JobUID: (?P<job_uid>[^)]*)\)"
    r"(?: due to (?P<why>[^;]*))?"
)
_NO_FLAVOR = re.compile(
    r"flavor (\S+) not found|untolerated taint|doesn't match node affinity|no flavor|"
    r"unavailable in ClusterQueue"
)
_INACTIVE = re.compile(r"(ClusterQueue|LocalQueue) (\S+) is (inactive|stopped|terminating)")
_QUEUE_MISSING = re.compile(r"LocalQueue (\S+) (doesn't exist|is terminating or missing)")
_EXCEEDED_QUOTA = re.compile(r"exceeded quota", re.IGNORECASE)

_NON_GPU = ("cpu", "memory", "pods", "ephemeral-storage")


def _amount(text: str) -> str:
    return text.strip()


def _explain_pending(reason: str, message: str) -> tuple[str, str]:
    """(code, plain message) for a QuotaReserved=False condition of Kueue."""
    message = message or ""
    too_big = [m.groupdict() for m in _MAX_CAPACITY_NEW.finditer(message)]
    too_big += [m.groupdict() for m in _MAX_CAPACITY_OLD.finditer(message)]
    if reason == "ExceedsMaxQuota" or too_big:
        parts = [
            f"needs {_amount(m['request'])} {m['resource']} on flavor {m['flavor']}, but the "
            f"queue can be admitted at most {_amount(m['maximum'])}"
            for m in too_big
        ]
        detail = "; ".join(parts) or "it asks for more than the queue's maximum"
        return "ExceedsMaximum", (
            f"This job can never start as it is: {detail}, even when borrowing. "
            "Cancel it and submit a smaller one, or ask for more quota."
        )
    preempting = _PENDING_PREEMPTION.search(message)
    if reason == "WaitingForPreemptedWorkloads" or preempting:
        count = int(preempting["count"]) if preempting else None
        what = f"{count} workload{'s' if count != 1 else ''}" if count is not None \
            else "other workloads"
        return "PendingPreemption", (
            f"Kueue is preempting {what} to make room for this job; it starts when they "
            "have stopped."
        )
    short = [m.groupdict() for m in _UNUSED_QUOTA.finditer(message)]
    if reason == "WaitingForQuota" or short:
        gpu = [m for m in short if m["resource"] not in _NON_GPU] or short
        parts = [
            f"{_amount(m['more'])} more {m['resource']} on flavor {m['flavor']}"
            for m in gpu
        ]
        needed = (" It needs " + " or ".join(parts) + " than are free now.") if parts else ""
        return "WaitingForQuota", (
            f"Waiting for quota: the team's queue (and what it can borrow) has not enough "
            f"unused GPUs at the moment.{needed} It starts when running jobs finish."
        )
    missing = _QUEUE_MISSING.search(message)
    if missing:
        return "QueueNotFound", (
            f"The team's queue {missing.group(1)} does not exist on the cluster; platform "
            "staff must set the team up before jobs can be admitted."
        )
    inactive = _INACTIVE.search(message)
    if inactive or reason == "Suspended":
        which = f"{inactive.group(1)} {inactive.group(2)} is {inactive.group(3)}" if inactive \
            else "the queue is inactive"
        return "QueueInactive", (
            f"No job can be admitted now: {which} (for example a flavor it uses is missing, "
            "or staff stopped it). Platform staff have to fix the queue."
        )
    if reason == "NoMatchingFlavor" or _NO_FLAVOR.search(message):
        return "NoMatchingFlavor", (
            "None of the queue's GPU flavors can run this job (the requested GPU kind is not "
            f"in the team's quota, or the flavor's nodes do not fit): {message or reason}."
        )
    if reason in ("", "PendingEvaluation") and not message:
        return "PendingEvaluation", "Queued: waiting for Kueue to consider the job."
    return "Inadmissible", f"Kueue has not admitted the job: {message or reason}."


def _position_sentence(position: int | None) -> str:
    if position is None:
        return ""
    if position == 0:
        return " It is next in the team's queue."
    ahead = f"{position} job{'s' if position != 1 else ''}"
    return f" {ahead} ahead of it in the team's queue."


def _admitted_flavor(workload: dict | None) -> tuple[str | None, str | None]:
    admission = ((workload or {}).get("status") or {}).get("admission") or {}
    flavor = None
    for assignment in admission.get("podSetAssignments") or ():
        flavors = assignment.get("flavors") or {}
        gpu = [f for r, f in sorted(flavors.items()) if r not in _NON_GPU]
        flavor = flavor or (gpu[0] if gpu else next(iter(sorted(flavors.values())), None))
    return flavor, admission.get("clusterQueue")


def _job_failed_create(job_conds: dict[str, dict], events: Sequence[dict],
                       since: dt.datetime | None) -> tuple[bool, str]:
    """(quota refused?, message) for pods the job controller could not create.

    Only events at or after ``since`` (the current admission) count: a refusal
    before an earlier preemption says nothing about this admission.
    """
    messages = []
    for cond in job_conds.values():
        text = f"{cond.get('reason', '')} {cond.get('message', '')}"
        if cond.get("status") == "True" and _EXCEEDED_QUOTA.search(text):
            messages.append(cond.get("message") or "")
    for event in events:
        when = _event_time(event)
        if event.get("reason") == "FailedCreate" and (
                since is None or when is None or when >= since):
            messages.append(event.get("message") or "")
    quota = [m for m in messages if _EXCEEDED_QUOTA.search(m)]
    if quota:
        return True, quota[-1]
    return False, messages[-1] if messages else ""


def _active_pods(job: dict) -> int:
    status = job.get("status") or {}
    if job.get("kind") == "JobSet":
        return sum(int(r.get("active") or 0) for r in status.get("replicatedJobsStatus") or ())
    return int(status.get("active") or 0)


def _timeline(workload: dict | None, job: dict | None, events: Sequence[dict]) -> tuple[dict, ...]:
    entries = []
    for source, obj in (("Workload", workload), ("Job", job)):
        for cond in ((obj or {}).get("status") or {}).get("conditions") or ():
            if not isinstance(cond, dict):
                continue
            entries.append({
                "source": source,
                "type": cond.get("type", ""),
                "status": cond.get("status", ""),
                "reason": cond.get("reason", ""),
                "message": cond.get("message", ""),
                "time": _format_time(parse_time(cond.get("lastTransitionTime"))),
            })
    for event in events:
        entries.append({
            "source": "Event",
            "type": event.get("type", ""),
            "status": "",
            "reason": event.get("reason", ""),
            "message": event.get("message", ""),
            "time": _format_time(_event_time(event)),
        })
    return tuple(sorted(entries, key=lambda e: (e["time"], e["source"], e["type"])))


def _preemptions(workload: dict | None, events: Sequence[dict]
                 ) -> tuple[int, str, str, tuple[dt.datetime, ...]]:
    """(count, preemptor job uid or workload uid, plain why, visible preemption times)."""
    status = (workload or {}).get("status") or {}
    conds = _conditions(workload)
    times: list[dt.datetime] = []
    preemptor, why = "", ""
    preempted = conds.get("Preempted")
    if preempted and preempted.get("status") == "True":
        t = parse_time(preempted.get("lastTransitionTime"))
        if t:
            times.append(t)
    evicted = conds.get("Evicted")
    if evicted and evicted.get("status") == "True" and evicted.get("reason") == "Preempted":
        t = parse_time(evicted.get("lastTransitionTime"))
        if t:
            times.append(t)
    last_message = ""
    for cond in (preempted, evicted):
        if cond and _PREEMPTED_BY.search(cond.get("message") or ""):
            last_message = cond["message"]
    for event in events:
        if event.get("reason") == "Preempted":
            t = _event_time(event)
            if t:
                times.append(t)
            if _PREEMPTED_BY.search(event.get("message") or ""):
                last_message = event.get("message") or last_message
    match = _PREEMPTED_BY.search(last_message)
    if match:
        job_uid, uid = match["job_uid"].strip(), match["uid"].strip()
        preemptor = job_uid if job_uid and job_uid != "UNKNOWN" else (
            uid if uid != "UNKNOWN" else "")
        why = (match["why"] or "").strip()
    visible = merge_times(times, tolerance_seconds=PREEMPTION_DEDUP_SECONDS)
    counted = sum(
        int(e.get("count") or 0)
        for e in (status.get("schedulingStats") or {}).get("evictions") or ()
        if e.get("reason") == "Preempted"
    )
    return max(counted, len(visible)), preemptor, why, visible


def interpret_kueue(
    *,
    job: dict | None,
    workload: dict | None,
    events: Sequence[dict] = (),
    queue_position: int | None = None,
    now: dt.datetime,
    cancelled: bool = False,
    known_preemption_times: Iterable[dt.datetime] = (),
) -> JobStatus:
    """Explain a job from what the cluster holds (pure; never raises on odd input).

    * ``job``: the live batch/v1 Job or JobSet dict, ``None`` if absent;
    * ``workload``: its Kueue Workload (:func:`workload_for_job`), or ``None``;
    * ``events``: core/v1 Events about the job and the Workload;
    * ``queue_position``: from the visibility API (0-based), ``None`` if the
      job is not listed there;
    * ``now``: aware ``datetime`` for the preemption-loop window;
    * ``cancelled``: the portal has cancelled the job (the phase is then
      ``Cancelled`` once the job is gone or its Workload deactivated, unless it
      had already finished);
    * ``known_preemption_times``: preemption instants the portal stored from
      earlier syncs (Kueue keeps only the latest condition), merged in.

    Rules, first match wins: finished job (Job ``Complete``/``Failed``
    condition, JobSet ``Completed``/``Failed``, Workload ``Finished``) ->
    Succeeded/Failed; cancelled -> Cancelled; Workload ``spec.active: false``
    -> Failed (Deactivated); no job -> Submitted; no Workload -> Submitted
    (WaitingForKueue); ``Admitted=True`` -> Running (pods active or
    ``PodsReady=True``) else Admitted (with ``NamespaceQuotaExceeded`` when
    the job controller's pods are refused by the ResourceQuota); ``Evicted``
    -> Queued (Preempted/Evicted); ``QuotaReserved=True`` -> Queued
    (AdmissionChecksPending); otherwise Queued with the explanation of the
    ``QuotaReserved=False`` reason and message (:data:`REASONS`).
    """
    events = [e for e in events if isinstance(e, dict)]
    wl_conds = _conditions(workload)
    job_conds = _conditions(job)
    job_status = (job or {}).get("status") or {}
    count, preemptor, why, visible_times = _preemptions(workload, events)
    times = merge_times(visible_times, known_preemption_times,
                        tolerance_seconds=PREEMPTION_DEDUP_SECONDS)
    count = max(count, len(times))
    flavor, cluster_queue = _admitted_flavor(workload)
    admitted = wl_conds.get("Admitted")
    pods_ready = wl_conds.get("PodsReady")
    common: dict[str, Any] = {
        "admitted_flavor": flavor,
        "cluster_queue": cluster_queue,
        "submitted_at": parse_time(((job or {}).get("metadata") or {}).get("creationTimestamp"))
        or parse_time(((workload or {}).get("metadata") or {}).get("creationTimestamp")),
        "admitted_at": parse_time((admitted or {}).get("lastTransitionTime"))
        if admitted and admitted.get("status") == "True" else None,
        "started_at": parse_time(job_status.get("startTime"))
        or (parse_time(pods_ready.get("lastTransitionTime"))
            if pods_ready and pods_ready.get("status") == "True" else None),
        "preemptions": count,
        "preemptor": preemptor,
        "preemption_times": times,
        "preemption_loop": preemption_loop(times, now),
        "timeline": _timeline(workload, job, events),
    }
    if common["admitted_at"] is None and flavor is not None:
        reserved = wl_conds.get("QuotaReserved") or {}
        common["admitted_at"] = parse_time(reserved.get("lastTransitionTime"))

    def status(phase: str, reason: str, message: str, **extra: Any) -> JobStatus:
        values = {**common, **extra}
        if values["preemption_loop"] and phase in ("Queued", "Admitted", "Running"):
            message += (f" It has been preempted {len(times)} times within the last hour "
                        "(a preemption loop): consider a higher priority or a smaller job.")
        return JobStatus(phase=phase, reason=reason, message=message, **values)

    # 1. finished
    finished = _finished(job, job_conds, wl_conds)
    if finished is not None:
        phase, reason, message, when = finished
        return status(phase, reason, message, finished_at=when)
    # 2. cancelled by the portal
    deactivated = workload is not None and (workload.get("spec") or {}).get("active") is False
    if cancelled and (job is None or deactivated):
        return status("Cancelled", "Cancelled", "Cancelled: the job was stopped and removed.",
                      finished_at=now)
    if deactivated:
        target = wl_conds.get("DeactivationTarget") or wl_conds.get("Evicted") or {}
        detail = target.get("message") or target.get("reason") or "Kueue deactivated it"
        return status("Failed", "Deactivated", f"Stopped by Kueue: {detail}.",
                      finished_at=parse_time(target.get("lastTransitionTime")) or now)
    # 3. not on the cluster, or Kueue has not seen it yet
    if job is None:
        return status("Submitted", "NotOnCluster",
                      "Submitted; the job is not on the cluster yet.")
    if workload is None:
        return status("Submitted", "WaitingForKueue",
                      "Submitted to the cluster; waiting for Kueue to pick it up.")
    # 4. admitted
    if admitted and admitted.get("status") == "True":
        if _active_pods(job) > 0 or (pods_ready and pods_ready.get("status") == "True"):
            return status("Running", "Running",
                          f"Running on flavor {flavor}." if flavor else "Running.")
        refused, detail = _job_failed_create(job_conds, events, common["admitted_at"])
        if refused:
            return status(
                "Admitted", "NamespaceQuotaExceeded",
                "Kueue admitted the job, but the team namespace's ResourceQuota refuses its "
                f"pods, so it cannot start: {detail}. This is not waiting for queue quota; "
                "platform staff must align the namespace quota with the team's queue.",
            )
        if detail:
            return status("Admitted", "PodsFailedToCreate",
                          f"Admitted, but its pods could not be created: {detail}")
        where = f" on flavor {flavor}" if flavor else ""
        return status("Admitted", "Admitted", f"Admitted{where}; starting its pods.")
    position = _position_sentence(queue_position)
    # 5. evicted (preempted, pods-ready timeout, ...) and back in the queue
    evicted = wl_conds.get("Evicted")
    if evicted and evicted.get("status") == "True":
        if evicted.get("reason") == "Preempted":
            cause = f" due to {why}" if why else ""
            return status(
                "Queued", "Preempted",
                f"Preempted{cause} to make room for another workload; back in the queue and "
                f"restarts from the beginning when admitted again.{position}",
                queue_position=queue_position,
            )
        return status(
            "Queued", "Evicted",
            f"Evicted ({evicted.get('reason') or 'unknown reason'}: "
            f"{evicted.get('message') or 'no detail'}); back in the queue.{position}",
            queue_position=queue_position,
        )
    reserved = wl_conds.get("QuotaReserved")
    if reserved and reserved.get("status") == "True":
        return status("Queued", "AdmissionChecksPending",
                      "Quota is reserved; waiting for the queue's admission checks.",
                      queue_position=queue_position)
    # 6. pending: explain Kueue's reason
    code, message = _explain_pending((reserved or {}).get("reason") or "",
                                     (reserved or {}).get("message") or "")
    if code == "PendingEvaluation":
        pending = wl_conds.get("Pending") or wl_conds.get("Inadmissible") or {}
        if pending.get("message"):
            code, message = _explain_pending(pending.get("reason") or "", pending["message"])
    return status("Queued", code, message + position, queue_position=queue_position)


def _finished(job: dict | None, job_conds: dict[str, dict], wl_conds: dict[str, dict]
              ) -> tuple[str, str, str, dt.datetime | None] | None:
    status = (job or {}).get("status") or {}
    for kind in ("Complete", "Completed"):
        cond = job_conds.get(kind)
        if cond and cond.get("status") == "True":
            when = parse_time(status.get("completionTime")) or parse_time(
                cond.get("lastTransitionTime"))
            return "Succeeded", "Succeeded", "Succeeded: every worker completed.", when
    cond = job_conds.get("Failed")
    if cond and cond.get("status") == "True":
        when = parse_time(cond.get("lastTransitionTime"))
        reason = cond.get("reason") or ""
        if reason == "DeadlineExceeded":
            return ("Failed", "MaxRuntimeExceeded",
                    "Stopped: the job ran longer than its maximum runtime.", when)
        detail = cond.get("message") or reason or "a worker failed"
        return "Failed", "Failed", f"Failed: {detail}.", when
    cond = wl_conds.get("Finished")
    if cond and cond.get("status") == "True":
        when = parse_time(cond.get("lastTransitionTime"))
        if cond.get("reason") == "Succeeded":
            return "Succeeded", "Succeeded", "Succeeded: every worker completed.", when
        detail = cond.get("message") or cond.get("reason") or "failed"
        return "Failed", "Failed", f"Failed: {detail}.", when
    return None
