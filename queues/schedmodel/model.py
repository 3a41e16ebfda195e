"""Inputs and outputs of the scheduler simulator: jobs, node pools, events, usage.

Pure data, no Django, no ``kubernetes``. Times are **simulated seconds** (floats,
0 = start of the simulation); GPU amounts are whole units of a flavor's
``gpu_resource`` (GPUs for ``nvidia.com/gpu``, MIG instances for
``nvidia.com/mig-*``). Bad values raise ``queues.specs.SpecError`` naming the field.
"""

from __future__ import annotations

import functools
import math
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from queues.specs import SpecError, check_dns_label, check_extended_resource_name

__all__ = [
    "DEFAULT_GPU_RESOURCE",
    "OUTCOMES",
    "PROFILES",
    "NodePool",
    "PodPlacement",
    "SimEvent",
    "SimJob",
    "UsageSample",
    "job_uid",
]

DEFAULT_GPU_RESOURCE = "nvidia.com/gpu"
#: Declared outcomes of a job (Kueue ``Finished`` reasons, Volcano job phases).
OUTCOMES = ("Succeeded", "Failed")
#: Activity profiles the DCGM exporter knows (``harness.sim.dcgm``).
PROFILES = ("training", "notebook", "inference")

_UID_NAMESPACE = uuid.UUID("6f1f3c1e-6b2a-4a53-9d0e-2c4f3b1a9e10")


@functools.lru_cache(maxsize=65536)
def job_uid(namespace: str, name: str) -> str:
    """A deterministic UID for ``namespace/name`` (uuid5), so runs are reproducible."""
    return str(uuid.uuid5(_UID_NAMESPACE, f"{namespace}/{name}"))


def _check_int(value: Any, field: str, *, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise SpecError(field, f"must be an int, got {value!r}")
    if value < low:
        raise SpecError(field, f"must be >= {low}, got {value}")
    return value


def _check_time(value: Any, field: str, *, positive: bool) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise SpecError(field, f"must be a number of seconds, got {value!r}")
    if not math.isfinite(value) or value < 0 or (positive and value == 0):
        raise SpecError(field, f"must be {'> 0' if positive else '>= 0'} seconds, got {value!r}")
    return float(value)


@dataclass(frozen=True, slots=True, kw_only=True)
class SimJob:
    """A gang job submitted to the simulated cluster.

    * ``name`` / ``namespace``: the job's name and its team namespace; the team's
      queue (Kueue LocalQueue -> ClusterQueue, Volcano Queue) is ``queue`` or,
      when ``None``, the namespace (the portal names them after the team slug).
    * ``workers`` x ``gpus_per_worker``: the gang, one pod set ``main``; all
      ``workers`` pods are admitted together or not at all (Kueue), or at least
      ``min_available`` of them (Volcano; default = ``workers``).
    * ``gpu_resource``: what each worker requests (``nvidia.com/gpu`` or a MIG
      profile resource); only flavors serving that resource are considered.
    * ``flavor``: a required flavor (a node selector on the job), or ``None``.
    * ``priority``: the priority class value (higher first); ``priority_class``
      its name for display.
    * ``submit_time`` (s, >= 0), ``duration`` (s, > 0: running time once
      admitted; restarts from zero after a preemption), ``outcome``
      (``"Succeeded"`` or ``"Failed"``).
    * ``profile``: GPU activity profile for the DCGM exporter (``PROFILES``).
    * ``labels``: free-form strings carried into results (e.g. a workload class).
    """

    name: str
    namespace: str
    workers: int = 1
    gpus_per_worker: int = 1
    gpu_resource: str = DEFAULT_GPU_RESOURCE
    queue: str | None = None
    flavor: str | None = None
    priority: int = 0
    priority_class: str | None = None
    submit_time: float = 0.0
    duration: float = 60.0
    outcome: str = "Succeeded"
    min_available: int | None = None
    profile: str = "training"
    labels: Mapping[str, str] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        check_dns_label(self.name, "name")
        check_dns_label(self.namespace, "namespace")
        if self.queue is not None:
            check_dns_label(self.queue, "queue")
        if self.flavor is not None:
            check_dns_label(self.flavor, "flavor")
        _check_int(self.workers, "workers", low=1)
        _check_int(self.gpus_per_worker, "gpus_per_worker", low=1)
        check_extended_resource_name(self.gpu_resource, "gpu_resource")
        if isinstance(self.priority, bool) or not isinstance(self.priority, int):
            raise SpecError("priority", f"must be an int, got {self.priority!r}")
        object.__setattr__(
            self, "submit_time", _check_time(self.submit_time, "submit_time", positive=False)
        )
        object.__setattr__(self, "duration", _check_time(self.duration, "duration", positive=True))
        if self.outcome not in OUTCOMES:
            raise SpecError("outcome", f"must be one of {', '.join(OUTCOMES)}; "
                                       f"got {self.outcome!r}")
        if self.min_available is not None:
            _check_int(self.min_available, "min_available", low=1)
            if self.min_available > self.workers:
                raise SpecError(
                    "min_available",
                    f"must be <= workers ({self.workers}), got {self.min_available}",
                )
        if self.profile not in PROFILES:
            raise SpecError("profile", f"must be one of {', '.join(PROFILES)}; "
                                       f"got {self.profile!r}")
        object.__setattr__(self, "labels", MappingProxyType(dict(self.labels)))

    @property
    def key(self) -> str:
        """``namespace/name``: the job's identity in events and results."""
        return f"{self.namespace}/{self.name}"

    @property
    def queue_name(self) -> str:
        """The team queue the job goes to (``queue`` or the namespace)."""
        return self.queue or self.namespace

    @property
    def total_gpus(self) -> int:
        """``workers * gpus_per_worker``: the quota the whole gang needs."""
        return self.workers * self.gpus_per_worker

    @property
    def gang_size(self) -> int:
        """Pods that must start together: ``min_available`` or ``workers``."""
        return self.min_available or self.workers

    @property
    def uid(self) -> str:
        return job_uid(self.namespace, self.name)


@dataclass(frozen=True, slots=True, kw_only=True)
class NodePool:
    """The nodes of one flavor: ``nodes`` machines of ``units_per_node`` each.

    * ``flavor``: the flavor name (ResourceFlavor / node selector).
    * ``gpu_resource``: the resource the nodes advertise.
    * ``units_per_node``: allocatable units per node (GPUs, or MIG instances:
      ``gpus_per_node * mig_instances_per_gpu``).
    * ``gpu_model``: the ``modelName`` dcgm-exporter reports.
    * ``mig_profile`` / ``mig_instances_per_gpu``: for a MIG flavor, the profile
      (``1g.10gb``) and instances per physical GPU; unit ``i`` of a node is
      instance ``i % per_gpu`` of GPU ``i // per_gpu``.
    * ``memory_mib``: framebuffer per unit (MiB), the ceiling of ``FB_USED``.
    * ``node_prefix``: node names are ``<prefix>-<index>`` (default the flavor).
    """

    flavor: str
    nodes: int
    units_per_node: int
    gpu_resource: str = DEFAULT_GPU_RESOURCE
    gpu_model: str = "NVIDIA H100 80GB HBM3"
    mig_profile: str | None = None
    mig_instances_per_gpu: int = 1
    memory_mib: int = 81559
    node_prefix: str | None = None

    def __post_init__(self) -> None:
        check_dns_label(self.flavor, "flavor")
        _check_int(self.nodes, "nodes", low=1)
        _check_int(self.units_per_node, "units_per_node", low=1)
        check_extended_resource_name(self.gpu_resource, "gpu_resource")
        _check_int(self.mig_instances_per_gpu, "mig_instances_per_gpu", low=1)
        _check_int(self.memory_mib, "memory_mib", low=1)
        if self.mig_profile is None and self.mig_instances_per_gpu != 1:
            raise SpecError("mig_instances_per_gpu", "must be 1 without a mig_profile")
        if self.units_per_node % self.mig_instances_per_gpu:
            raise SpecError(
                "units_per_node",
                f"must be a multiple of mig_instances_per_gpu ({self.mig_instances_per_gpu})",
            )

    @property
    def total_units(self) -> int:
        """``nodes * units_per_node``."""
        return self.nodes * self.units_per_node

    def node_name(self, index: int) -> str:
        """Name of node ``index`` (0-based)."""
        return f"{self.node_prefix or self.flavor}-{index}"


@dataclass(frozen=True, slots=True)
class PodPlacement:
    """One running pod: ``pod`` name, its ``node`` (``None`` when the flavor has no
    node pool: quota-only simulation) and the unit indices it holds on that node."""

    pod: str
    node: str | None
    units: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class SimEvent:
    """One thing that happened to a workload.

    * ``time``: simulated seconds.
    * ``workload``: the job key ``namespace/name``; ``queue``: its team queue.
    * ``kind``: ``"queued"``, ``"pending"`` (a QuotaReserved=False / Unschedulable
      update with the reason), ``"admitted"``, ``"preempted"``, ``"finished"``,
      ``"cancelled"``.
    * ``flavor``: admitted flavor (Kueue) or the flavor of the nodes (Volcano).
    * ``reason`` / ``message``: in the scheduler's own words (Kueue condition
      reasons such as ``WaitingForQuota``, ``InClusterQueue``; Volcano's
      ``NotEnoughResources``...).
    * ``by``: for ``"preempted"``, the preemptor's key.
    """

    time: float
    workload: str
    queue: str
    kind: str
    flavor: str | None = None
    reason: str = ""
    message: str = ""
    by: str | None = None


@dataclass(frozen=True, slots=True)
class UsageSample:
    """Usage of one queue in one flavor (Kueue) or resource (Volcano) from ``time``
    on: ``gpus`` units admitted, of which ``borrowed`` above the queue's nominal
    quota (Kueue) or deserved share (Volcano)."""

    time: float
    queue: str
    flavor: str
    gpus: int
    borrowed: int
