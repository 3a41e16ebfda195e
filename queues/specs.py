"""Validated, immutable descriptions of what the cluster should hold.

Pure data: no Django, no ``kubernetes`` import (quantities go through
``queues.quantity``). The portal builds these from database rows; the
renderers in ``queues.render`` turn them into manifests. Every value is
checked on construction, so a spec that exists is renderable; a bad value
raises ``SpecError`` naming the field (``error.field``).

Units
-----
* GPU counts (``nominal_gpus``, ``borrowing_limit_gpus``, ...) are ``int``
  counts of the flavor's ``gpu_resource`` as the NVIDIA device plugin
  advertises it and as pods request it: whole GPUs for ``nvidia.com/gpu``,
  MIG instances for ``nvidia.com/mig-*``, time slices for a time-sliced
  flavor. ``bool`` and ``float`` are rejected.
* CPU and memory are Kubernetes quantity strings (cores, bytes).
* Weights are ``Decimal`` (``str``, ``int`` and ``float`` are accepted and
  converted exactly through ``str``).

Naming
------
All object names (flavor, cohort, team slug, priority class) follow the
DNS-1123 *label* rules (lowercase alphanumerics and ``-``, at most 63
characters), the strictest rule of every object they end up in: a team slug
is a Namespace name, and the same slug names the team's ClusterQueue,
LocalQueue and Volcano Queue
(https://kubernetes.io/docs/concepts/overview/working-with-objects/names/).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from types import MappingProxyType
from typing import Any

from queues import quantity

__all__ = [
    "BORROW_WITHIN_COHORT_POLICIES",
    "RECLAIM_WITHIN_COHORT_POLICIES",
    "TAINT_EFFECTS",
    "WITHIN_CLUSTER_QUEUE_POLICIES",
    "CohortSpec",
    "FlavorQuota",
    "FlavorSpec",
    "PriorityClassSpec",
    "SpecError",
    "Taint",
    "TeamQueueSpec",
    "Toleration",
]


class SpecError(ValueError):
    """A spec value that cannot reach a manifest.

    ``field`` is the name of the offending field, with an index path for
    nested values (``"quotas[1].lending_limit_gpus"``); ``str(error)`` is
    ``"<field>: <reason>"``.
    """

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        self.message = message
        super().__init__(f"{field}: {message}")


# --- name rules --------------------------------------------------------------

_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS1123_SUBDOMAIN = re.compile(
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
)
_QUALIFIED_NAME_PART = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")

#: ResourceFlavor taint effects (Kueue CRD rule) and Kubernetes taint effects.
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
#: ClusterQueue ``spec.preemption`` enums (kueue.x-k8s.io/v1beta2 CRD).
RECLAIM_WITHIN_COHORT_POLICIES = ("Never", "LowerPriority", "Any")
#: Pod Security admission of team Namespaces
#: (https://kubernetes.io/docs/concepts/security/pod-security-admission/).
POD_SECURITY_MODES = ("enforce", "warn", "audit")
POD_SECURITY_LEVELS = ("privileged", "baseline", "restricted")
WITHIN_CLUSTER_QUEUE_POLICIES = ("Never", "LowerPriority", "LowerOrNewerEqualPriority")
BORROW_WITHIN_COHORT_POLICIES = ("Never", "LowerPriority")

#: ResourceFlavor ``nodeTaints`` and ``tolerations`` have ``maxItems: 8``.
_MAX_FLAVOR_TAINTS = 8
#: ResourceFlavor ``spec.nodeLabels`` ``maxProperties`` (Kueue CRD).
_MAX_FLAVOR_LABELS = 8
#: Highest value a user-defined PriorityClass may take (kube-apiserver rule).
_HIGHEST_USER_PRIORITY = 1_000_000_000
_INT32_MIN = -(2**31)


def check_dns_label(value: Any, field: str) -> str:
    """Return ``value`` if it is a DNS-1123 label (<= 63 chars), else raise ``SpecError``."""
    if not isinstance(value, str) or not value:
        raise SpecError(field, f"must be a non-empty string, got {value!r}")
    if len(value) > 63:
        raise SpecError(field, f"must be at most 63 characters, got {len(value)}")
    if not _DNS1123_LABEL.match(value):
        raise SpecError(
            field,
            f"{value!r} must consist of lowercase letters, digits and '-', "
            "and start and end with a letter or digit (DNS-1123 label)",
        )
    return value


def _check_qualified_name(value: Any, field: str) -> str:
    """Kubernetes qualified name: ``[prefix/]name`` as used by label keys and taint keys."""
    if not isinstance(value, str) or not value:
        raise SpecError(field, f"must be a non-empty string, got {value!r}")
    prefix, slash, name = value.rpartition("/")
    if slash and (not prefix or len(prefix) > 253 or not _DNS1123_SUBDOMAIN.match(prefix)):
        raise SpecError(field, f"{value!r} has an invalid prefix (must be a DNS-1123 subdomain)")
    if len(name) > 63 or not _QUALIFIED_NAME_PART.match(name):
        raise SpecError(
            field,
            f"{value!r} must be at most 63 alphanumerics, '-', '_' or '.' after the optional "
            "prefix, starting and ending with an alphanumeric",
        )
    return value


def _check_label_value(value: Any, field: str) -> str:
    if not isinstance(value, str):
        raise SpecError(field, f"must be a string, got {value!r}")
    if len(value) > 63 or not _LABEL_VALUE.match(value):
        raise SpecError(field, f"{value!r} is not a valid label value (<= 63 alphanumerics, '-_.')")
    return value


def check_extended_resource_name(value: Any, field: str) -> str:
    """Return ``value`` if it is a valid extended resource name such as ``nvidia.com/gpu``.

    Rules of ``IsExtendedResourceName`` in Kubernetes: a qualified name with a
    domain prefix outside ``kubernetes.io``, and ``requests.<name>`` must also
    be a qualified name (it becomes a ResourceQuota key).
    https://kubernetes.io/docs/concepts/configuration/manage-resources-containers/#extended-resources
    """
    _check_qualified_name(value, field)
    prefix, slash, _ = value.rpartition("/")
    if not slash:
        raise SpecError(field, f"{value!r} must have a vendor domain prefix, e.g. 'nvidia.com/gpu'")
    if prefix == "kubernetes.io" or prefix.endswith(".kubernetes.io"):
        raise SpecError(field, f"{value!r} must not use the kubernetes.io domain")
    _check_qualified_name(f"requests.{value}", field)
    return value


def check_gpu_count(value: Any, field: str, *, allow_none: bool = False) -> int | None:
    """A GPU count: a non-negative ``int`` (``bool`` and ``float`` rejected)."""
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise SpecError(field, f"must be a whole number of GPUs (int), got {value!r}")
    if value < 0:
        raise SpecError(field, f"must not be negative, got {value}")
    return value


def check_quantity(value: Any, field: str, *, allow_none: bool = False) -> str | None:
    """A non-negative Kubernetes quantity string, returned unchanged."""
    if value is None and allow_none:
        return None
    try:
        parsed = quantity.parse(value)
    except ValueError as exc:
        raise SpecError(field, str(exc)) from None
    if parsed < 0:
        raise SpecError(field, f"must not be negative, got {value!r}")
    return value


def check_weight(value: Any, field: str) -> Decimal:
    """A fair-sharing weight: > 0, at most 9 decimal places (a Kubernetes quantity)."""
    if isinstance(value, bool) or not isinstance(value, Decimal | int | float | str):
        raise SpecError(field, f"must be a number, got {value!r}")
    try:
        weight = Decimal(str(value)) if not isinstance(value, Decimal) else value
    except InvalidOperation:
        raise SpecError(field, f"must be a number, got {value!r}") from None
    if not weight.is_finite() or weight <= 0:
        raise SpecError(field, f"must be greater than 0, got {value!r}")
    if weight != weight.quantize(Decimal("1e-9")):
        raise SpecError(field, f"must have at most 9 decimal places, got {value!r}")
    return weight


def _check_choice(value: Any, field: str, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise SpecError(field, f"must be one of {', '.join(choices)}; got {value!r}")
    return value


def _as_tuple(value: Any, field: str, item_type: type) -> tuple:
    if isinstance(value, str | bytes | Mapping) or not isinstance(value, Iterable):
        raise SpecError(field, f"must be a sequence of {item_type.__name__}, got {value!r}")
    items = tuple(value)
    for index, item in enumerate(items):
        if not isinstance(item, item_type):
            raise SpecError(f"{field}[{index}]", f"must be a {item_type.__name__}, got {item!r}")
    return items


def _set(obj: object, name: str, value: Any) -> None:
    object.__setattr__(obj, name, value)


# --- flavors -------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Taint:
    """A node taint of a GPU node pool, mirrored in ``ResourceFlavor.spec.nodeTaints``.

    Kueue uses flavor taints to decide which flavors a workload may use; the
    workload must tolerate them
    (https://kueue.sigs.k8s.io/docs/concepts/resource_flavor/#resourceflavor-taints).
    ``key`` is a qualified name, ``value`` a label value, ``effect`` one of
    ``TAINT_EFFECTS``.
    """

    key: str
    value: str = ""
    effect: str = "NoSchedule"

    def __post_init__(self) -> None:
        _check_qualified_name(self.key, "key")
        _check_label_value(self.value, "value")
        _check_choice(self.effect, "effect", TAINT_EFFECTS)


@dataclass(frozen=True, slots=True, kw_only=True)
class Toleration:
    """A toleration that Kueue adds to admitted pods of a flavor (``spec.tolerations``).

    Rules from the ResourceFlavor CRD and core validation: ``operator`` is
    ``Equal`` or ``Exists``; an empty ``key`` needs ``Exists``; ``Exists``
    takes no ``value``; ``effect`` is empty (all effects) or a taint effect;
    ``toleration_seconds`` (seconds, int) only with ``NoExecute``.
    """

    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""
    toleration_seconds: int | None = None

    def __post_init__(self) -> None:
        if self.key:
            _check_qualified_name(self.key, "key")
        _check_choice(self.operator, "operator", ("Equal", "Exists"))
        if not self.key and self.operator != "Exists":
            raise SpecError("operator", "must be 'Exists' when key is empty")
        _check_label_value(self.value, "value")
        if self.operator == "Exists" and self.value:
            raise SpecError("value", "must be empty when operator is 'Exists'")
        _check_choice(self.effect, "effect", ("", *TAINT_EFFECTS))
        if self.toleration_seconds is not None:
            if isinstance(self.toleration_seconds, bool) or not isinstance(
                self.toleration_seconds, int
            ):
                raise SpecError("toleration_seconds", "must be an int (seconds)")
            if self.effect != "NoExecute":
                raise SpecError("toleration_seconds", "is only allowed with effect 'NoExecute'")


@dataclass(frozen=True, slots=True, kw_only=True)
class FlavorSpec:
    """A GPU flavor: one kind of GPU on one labelled pool of nodes.

    Becomes a Kueue ResourceFlavor of the same ``name``
    (https://kueue.sigs.k8s.io/docs/concepts/resource_flavor/).

    * ``gpu_resource``: extended resource pods request, ``nvidia.com/gpu`` or a
      MIG profile such as ``nvidia.com/mig-1g.10gb``.
    * ``gpu_model``: product name for people, e.g. ``NVIDIA-A100-SXM4-80GB``.
    * ``node_labels``: labels selecting the pool (``nvidia.com/gpu.product``...),
      stored as a read-only mapping.
    * ``physical_gpus``: devices in the pool as the hardware has them (GPUs, or
      MIG instances for a MIG flavor), before time-slicing.
    * ``time_slicing_replicas``: slices per device the device plugin
      advertises (1 = no time-slicing). ``allocatable_gpus`` =
      ``physical_gpus * time_slicing_replicas`` is what pods can request and
      what quotas count.
    * ``cpu_per_gpu`` (cores) / ``memory_per_gpu`` (bytes): quantity strings,
      the host share that goes with one requestable GPU; used to derive CPU
      and memory quotas and limits from GPU counts.
    """

    name: str
    gpu_resource: str
    gpu_model: str
    node_labels: Mapping[str, str] = field(default_factory=dict, hash=False)
    node_taints: tuple[Taint, ...] = ()
    tolerations: tuple[Toleration, ...] = ()
    physical_gpus: int = 0
    time_slicing_replicas: int = 1
    cpu_per_gpu: str = "0"
    memory_per_gpu: str = "0"

    def __post_init__(self) -> None:
        check_dns_label(self.name, "name")
        check_extended_resource_name(self.gpu_resource, "gpu_resource")
        if not isinstance(self.gpu_model, str) or not self.gpu_model.strip():
            raise SpecError("gpu_model", "must be a non-empty string")
        if not isinstance(self.node_labels, Mapping):
            raise SpecError(
                "node_labels", f"must be a mapping of str to str, got {self.node_labels!r}"
            )
        if len(self.node_labels) > _MAX_FLAVOR_LABELS:
            raise SpecError("node_labels", f"at most {_MAX_FLAVOR_LABELS} node labels")
        labels = {}
        for key, value in sorted(self.node_labels.items()):
            _check_qualified_name(key, f"node_labels[{key!r}]")
            labels[key] = _check_label_value(value, f"node_labels[{key!r}]")
        _set(self, "node_labels", MappingProxyType(labels))
        taints = _as_tuple(self.node_taints, "node_taints", Taint)
        if len(taints) > _MAX_FLAVOR_TAINTS:
            raise SpecError("node_taints", f"at most {_MAX_FLAVOR_TAINTS} taints")
        seen = set()
        for index, taint in enumerate(taints):
            if (taint.key, taint.effect) in seen:
                raise SpecError(f"node_taints[{index}]", "taints must be unique by key and effect")
            seen.add((taint.key, taint.effect))
        _set(self, "node_taints", taints)
        tolerations = _as_tuple(self.tolerations, "tolerations", Toleration)
        if len(tolerations) > _MAX_FLAVOR_TAINTS:
            raise SpecError("tolerations", f"at most {_MAX_FLAVOR_TAINTS} tolerations")
        _set(self, "tolerations", tolerations)
        check_gpu_count(self.physical_gpus, "physical_gpus")
        if isinstance(self.time_slicing_replicas, bool) or not isinstance(
            self.time_slicing_replicas, int
        ):
            raise SpecError("time_slicing_replicas", "must be an int >= 1")
        if self.time_slicing_replicas < 1:
            raise SpecError(
                "time_slicing_replicas", f"must be >= 1, got {self.time_slicing_replicas}"
            )
        check_quantity(self.cpu_per_gpu, "cpu_per_gpu")
        check_quantity(self.memory_per_gpu, "memory_per_gpu")

    @property
    def allocatable_gpus(self) -> int:
        """Requestable devices in the pool: ``physical_gpus * time_slicing_replicas``."""
        return self.physical_gpus * self.time_slicing_replicas

    @property
    def is_time_sliced(self) -> bool:
        return self.time_slicing_replicas > 1


# --- quotas --------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class FlavorQuota:
    """One flavor's quota in a team's ClusterQueue or a cohort's shared pool.

    Kueue semantics (https://kueue.sigs.k8s.io/docs/concepts/cluster_queue/):

    * ``nominal_gpus``: GPUs guaranteed to the owner (``nominalQuota``).
    * ``borrowing_limit_gpus``: most GPUs the owner may borrow *on top of*
      nominal from the cohort (``borrowingLimit``); ``None`` = no limit.
    * ``lending_limit_gpus``: most of the owner's unused nominal GPUs others
      may borrow (``lendingLimit``); ``None`` = all of it. Must be
      ``<= nominal_gpus``. ``nominal - lending`` is never lent.
    * ``cpu`` / ``memory``: nominal CPU (cores) and memory (bytes) quantity
      strings; ``None`` derives them as ``nominal_gpus * flavor.cpu_per_gpu``
      (``memory_per_gpu``) at render time.

    CPU and memory borrowing/lending limits are derived proportionally from
    the GPU limits at render time: ``limit_gpus * flavor.cpu_per_gpu`` (and
    ``memory_per_gpu``), a lending limit capped at the nominal CPU/memory; an
    unlimited GPU limit leaves CPU/memory unlimited too. So a team that may
    borrow 4 GPUs may also borrow the host share those 4 GPUs come with.

    ``gpu_resource`` repeats the flavor's resource so that a quota can be
    read alone; renderers check that both agree.
    """

    flavor: str
    gpu_resource: str
    nominal_gpus: int
    borrowing_limit_gpus: int | None = None
    lending_limit_gpus: int | None = None
    cpu: str | None = None
    memory: str | None = None

    def __post_init__(self) -> None:
        check_dns_label(self.flavor, "flavor")
        check_extended_resource_name(self.gpu_resource, "gpu_resource")
        check_gpu_count(self.nominal_gpus, "nominal_gpus")
        check_gpu_count(self.borrowing_limit_gpus, "borrowing_limit_gpus", allow_none=True)
        check_gpu_count(self.lending_limit_gpus, "lending_limit_gpus", allow_none=True)
        if self.lending_limit_gpus is not None and self.lending_limit_gpus > self.nominal_gpus:
            raise SpecError(
                "lending_limit_gpus",
                f"must be <= nominal_gpus ({self.nominal_gpus}), got {self.lending_limit_gpus}",
            )
        check_quantity(self.cpu, "cpu", allow_none=True)
        check_quantity(self.memory, "memory", allow_none=True)

    @property
    def has_limits(self) -> bool:
        return self.borrowing_limit_gpus is not None or self.lending_limit_gpus is not None


def _check_quotas(quotas: Any, field: str, *, has_parent: bool, parent_word: str) -> tuple:
    items = _as_tuple(quotas, field, FlavorQuota)
    seen: set[str] = set()
    for index, quota in enumerate(items):
        if quota.flavor in seen:
            raise SpecError(f"{field}[{index}].flavor", f"flavor {quota.flavor!r} listed twice")
        seen.add(quota.flavor)
        if not has_parent:
            # Kueue webhook: borrowingLimit/lendingLimit "must be nil when
            # cohort (parent) is empty".
            for name in ("borrowing_limit_gpus", "lending_limit_gpus"):
                if getattr(quota, name) is not None:
                    raise SpecError(
                        f"{field}[{index}].{name}", f"must be unset when there is no {parent_word}"
                    )
    return items


@dataclass(frozen=True, slots=True, kw_only=True)
class CohortSpec:
    """A cohort (department): teams in it lend each other unused quota.

    Becomes a Kueue Cohort (https://kueue.sigs.k8s.io/docs/concepts/cohort/)
    and, for Volcano, a parent Queue.

    * ``parent``: name of the parent cohort (hierarchical cohorts) or ``None``.
    * ``weight``: fair-sharing weight (``Decimal`` > 0).
    * ``shared_pool``: optional staff-configured quota *added* to the sum of
      the member teams' quotas (Cohort ``resourceGroups``). Its borrowing and
      lending limits apply towards the parent and need a ``parent``.
    """

    name: str
    parent: str | None = None
    weight: Decimal | int | float | str = Decimal(1)
    shared_pool: tuple[FlavorQuota, ...] = ()

    def __post_init__(self) -> None:
        check_dns_label(self.name, "name")
        if self.parent is not None:
            check_dns_label(self.parent, "parent")
            if self.parent == self.name:
                raise SpecError("parent", "a cohort cannot be its own parent")
        _set(self, "weight", check_weight(self.weight, "weight"))
        _set(
            self,
            "shared_pool",
            _check_quotas(
                self.shared_pool,
                "shared_pool",
                has_parent=self.parent is not None,
                parent_word="parent",
            ),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class TeamQueueSpec:
    """A team: a Namespace, a ResourceQuota, a ClusterQueue and a LocalQueue.

    * ``slug``: DNS-1123 label; the Namespace name, and (derived) the
      ClusterQueue, LocalQueue and Volcano Queue names: ``cluster_queue_name``
      and ``local_queue_name`` are both ``slug`` (ClusterQueues are cluster
      scoped, so slugs are unique across the cluster; one LocalQueue per team
      namespace).
    * ``cohort``: cohort name or ``None`` (no borrowing, no lending: then no
      quota may carry limits, a Kueue webhook rule checked here).
    * ``weight``: fair-sharing weight (``Decimal`` > 0).
    * ``quotas``: one ``FlavorQuota`` per flavor, in preference order (Kueue
      tries a ClusterQueue's flavors in the listed order).
    * preemption (https://kueue.sigs.k8s.io/docs/concepts/preemption/):
      ``reclaim_within_cohort`` (default ``Any``: take back lent quota from
      any borrower), ``within_cluster_queue`` (default ``LowerPriority``),
      ``borrow_within_cohort`` (default ``Never``) with an optional
      ``borrow_within_cohort_max_priority`` threshold.
      ``reclaim_within_cohort="Never"`` forbids borrow preemption (CRD rule).
    """

    slug: str
    display_name: str
    cohort: str | None = None
    weight: Decimal | int | float | str = Decimal(1)
    quotas: tuple[FlavorQuota, ...] = ()
    reclaim_within_cohort: str = "Any"
    within_cluster_queue: str = "LowerPriority"
    borrow_within_cohort: str = "Never"
    borrow_within_cohort_max_priority: int | None = None
    #: Pod Security admission labels of the Namespace: ``(mode, level)`` pairs, mode
    #: ``enforce``/``warn``/``audit``, level ``privileged``/``baseline``/``restricted``.
    pod_security: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        check_dns_label(self.slug, "slug")
        for mode, level in self.pod_security:
            _check_choice(mode, "pod_security", POD_SECURITY_MODES)
            _check_choice(level, "pod_security", POD_SECURITY_LEVELS)
        if not isinstance(self.display_name, str) or not self.display_name.strip():
            raise SpecError("display_name", "must be a non-empty string")
        if self.cohort is not None:
            check_dns_label(self.cohort, "cohort")
        _set(self, "weight", check_weight(self.weight, "weight"))
        _set(
            self,
            "quotas",
            _check_quotas(
                self.quotas, "quotas", has_parent=self.cohort is not None, parent_word="cohort"
            ),
        )
        _check_choice(
            self.reclaim_within_cohort, "reclaim_within_cohort", RECLAIM_WITHIN_COHORT_POLICIES
        )
        _check_choice(
            self.within_cluster_queue, "within_cluster_queue", WITHIN_CLUSTER_QUEUE_POLICIES
        )
        _check_choice(
            self.borrow_within_cohort, "borrow_within_cohort", BORROW_WITHIN_COHORT_POLICIES
        )
        if self.reclaim_within_cohort == "Never" and self.borrow_within_cohort != "Never":
            raise SpecError(
                "borrow_within_cohort", "must be 'Never' when reclaim_within_cohort is 'Never'"
            )
        threshold = self.borrow_within_cohort_max_priority
        if threshold is not None:
            if isinstance(threshold, bool) or not isinstance(threshold, int):
                raise SpecError("borrow_within_cohort_max_priority", "must be an int or None")
            if not _INT32_MIN <= threshold < 2**31:
                raise SpecError("borrow_within_cohort_max_priority", "must fit in int32")
            if self.borrow_within_cohort == "Never":
                raise SpecError(
                    "borrow_within_cohort_max_priority",
                    "only applies when borrow_within_cohort is 'LowerPriority'",
                )

    @property
    def namespace(self) -> str:
        """The team namespace (= ``slug``)."""
        return self.slug

    @property
    def cluster_queue_name(self) -> str:
        return self.slug

    @property
    def local_queue_name(self) -> str:
        return self.slug


# --- priorities ----------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class PriorityClassSpec:
    """A priority level, rendered as a core PriorityClass and a Kueue WorkloadPriorityClass.

    ``value`` is an int from -2147483648 to 1000000000 (higher values are
    reserved for system classes, and so are names starting with ``system-``;
    https://kubernetes.io/docs/concepts/scheduling-eviction/pod-priority-preemption/).
    ``description`` is at most 2048 characters (WorkloadPriorityClass CRD).
    """

    name: str
    value: int
    description: str = ""

    def __post_init__(self) -> None:
        check_dns_label(self.name, "name")
        if self.name.startswith("system-"):
            raise SpecError("name", "names starting with 'system-' are reserved")
        if isinstance(self.value, bool) or not isinstance(self.value, int):
            raise SpecError("value", f"must be an int, got {self.value!r}")
        if not _INT32_MIN <= self.value <= _HIGHEST_USER_PRIORITY:
            raise SpecError(
                "value",
                f"must be between {_INT32_MIN} and {_HIGHEST_USER_PRIORITY}, got {self.value}",
            )
        if not isinstance(self.description, str) or len(self.description) > 2048:
            raise SpecError("description", "must be a string of at most 2048 characters")
