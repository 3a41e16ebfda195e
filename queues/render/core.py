"""Core Kubernetes objects of a team: Namespace, ResourceQuota; shared PriorityClass.

ResourceQuota: the namespace-level hard cap
--------------------------------------------
Kueue admits a workload against the ClusterQueue; the pods it then creates
still pass the namespace ResourceQuota
(https://kubernetes.io/docs/concepts/policy/resource-quotas/). A quota
*lower* than what Kueue can admit leaves an admitted job without pods (the
known trap), so the quota is the most the team can ever be admitted with,
and it also stops pods that bypass Kueue (no queue-name label) from taking
more than that. Per flavor ``f`` of the team:

* no cohort: ``max(f) = nominal(f)``
* cohort, ``borrowingLimit`` set: ``max(f) = nominal(f) + borrowingLimit(f)``
* cohort, unlimited borrowing: ``max(f) = max(nominal(f), capacity(f))``
  where ``capacity(f)`` is the total nominal quota of the cohort tree for
  ``f`` (``amounts.cohort_capacity``; it includes the team's own nominal),
  i.e. everything the cohort could ever lend plus the team's own quota.

Then ``hard``:

* ``requests.<gpu resource>`` = sum of ``max(f).gpus`` over the team's
  flavors exposing that resource; every GPU resource of every known flavor
  is listed, ``"0"`` where the team has none, so that no pod of the team can
  use a GPU kind outside its grant. Extended resources only take the
  ``requests.`` prefix (the docs: "only quota items with prefix requests.
  are allowed" since they cannot be overcommitted), so there is no
  ``limits.<gpu>``; this holds for MIG profiles too.
* ``requests.cpu`` / ``requests.memory`` = sum of ``max(f).cpu`` /
  ``max(f).memory``, the CPU/memory borrowing limits being derived per GPU
  (see ``FlavorQuota``). No ``limits.cpu``/``limits.memory``: those would
  force every pod to declare limits. A quota on ``requests.cpu`` makes every
  pod of the namespace state CPU and memory requests (the portal's jobs do).
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal

from queues import quantity
from queues.render import amounts
from queues.render.labels import (
    DISPLAY_NAME_ANNOTATION,
    KIND_PRIORITY_CLASS,
    shared_labels,
    team_labels,
)
from queues.specs import FlavorSpec, PriorityClassSpec, SpecError, TeamQueueSpec, Toleration

__all__ = ["RESOURCE_QUOTA_NAME", "namespace", "priority_class", "resource_quota", "toleration"]

#: Name of the portal's ResourceQuota in each team namespace.
RESOURCE_QUOTA_NAME = "gpu-quota"


def toleration(t: Toleration) -> dict:
    """A core/v1 toleration (dict) for ``t``; empty fields are omitted."""
    item: dict = {}
    if t.key:
        item["key"] = t.key
    item["operator"] = t.operator
    if t.value:
        item["value"] = t.value
    if t.effect:
        item["effect"] = t.effect
    if t.toleration_seconds is not None:
        item["tolerationSeconds"] = t.toleration_seconds
    return item


def namespace(team: TeamQueueSpec) -> dict:
    """The team Namespace ``v1/Namespace`` named ``team.slug``.

    The API server adds ``kubernetes.io/metadata.name: <slug>``, which the
    team's ClusterQueue ``namespaceSelector`` matches. ``team.pod_security`` adds
    ``pod-security.kubernetes.io/<mode>: <level>`` labels (Pod Security admission).
    """
    labels = team_labels(team.slug)
    for mode, level in team.pod_security:
        labels[f"pod-security.kubernetes.io/{mode}"] = level
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {
            "name": team.namespace,
            "labels": labels,
            "annotations": {DISPLAY_NAME_ANNOTATION: team.display_name},
        },
    }


def max_admitted(
    team: TeamQueueSpec,
    flavors_by_name: Mapping[str, FlavorSpec],
    *,
    cohort_capacity: Mapping[str, amounts.Amounts] | None = None,
) -> dict[str, amounts.Amounts]:
    """Most the team can ever be admitted with, per flavor name (formula in the module doc).

    ``cohort_capacity`` (flavor name -> ``Amounts``, see
    ``amounts.cohort_capacity``) is required for every flavor whose borrowing
    is unlimited in a team with a cohort; ``SpecError`` otherwise.
    """
    result: dict[str, amounts.Amounts] = {}
    for index, quota in enumerate(team.quotas):
        field = f"quotas[{index}]"
        flavor = amounts.flavor_of(quota, flavors_by_name, field)
        own = amounts.nominal(quota, flavor)
        if team.cohort is None:
            result[quota.flavor] = own
            continue
        limit = amounts.borrowing_limit(quota, flavor)
        if limit is not None:
            result[quota.flavor] = own + limit
            continue
        capacity = (cohort_capacity or {}).get(quota.flavor)
        if capacity is None:
            raise SpecError(
                "cohort_capacity",
                f"needed for flavor {quota.flavor!r}: team {team.slug!r} may borrow without limit",
            )
        result[quota.flavor] = amounts.Amounts(
            gpus=max(own.gpus, capacity.gpus),
            cpu=max(own.cpu, capacity.cpu),
            memory=max(own.memory, capacity.memory),
        )
    return result


def resource_quota(
    team: TeamQueueSpec,
    flavors_by_name: Mapping[str, FlavorSpec],
    *,
    cohort_capacity: Mapping[str, amounts.Amounts] | None = None,
) -> dict:
    """The team's ``v1/ResourceQuota`` ``gpu-quota`` in its namespace.

    ``flavors_by_name``: every GPU flavor of the cluster (all their GPU
    resources are listed, ``"0"`` when not granted). ``cohort_capacity``: see
    ``max_admitted``. GPU counts are rendered as integers, ``requests.cpu`` in
    cores, ``requests.memory`` in bytes (binary suffix when every memory
    amount was stated with one).
    """
    maxima = max_admitted(team, flavors_by_name, cohort_capacity=cohort_capacity)
    gpus = {flavor.gpu_resource: 0 for flavor in flavors_by_name.values()}
    cpu = Decimal(0)
    memory = Decimal(0)
    binary = True
    for quota in team.quotas:
        flavor = flavors_by_name[quota.flavor]
        most = maxima[quota.flavor]
        gpus[quota.gpu_resource] = gpus.get(quota.gpu_resource, 0) + most.gpus
        cpu += most.cpu
        memory += most.memory
        binary = binary and amounts.memory_is_binary(quota, flavor)
    hard = {
        "requests.cpu": quantity.format_quantity(cpu),
        "requests.memory": quantity.format_quantity(memory, binary=binary),
    }
    for resource in sorted(gpus):
        hard[f"requests.{resource}"] = str(gpus[resource])
    return {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {
            "name": RESOURCE_QUOTA_NAME,
            "namespace": team.namespace,
            "labels": team_labels(team.slug),
        },
        "spec": {"hard": hard},
    }


def priority_class(pc: PriorityClassSpec) -> dict:
    """A ``scheduling.k8s.io/v1 PriorityClass`` for pods (``value``: int, higher wins).

    https://kubernetes.io/docs/concepts/scheduling-eviction/pod-priority-preemption/
    ``globalDefault`` stays false: the portal never changes the cluster default.
    """
    obj: dict = {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": pc.name, "labels": shared_labels(KIND_PRIORITY_CLASS)},
        "value": pc.value,
        "globalDefault": False,
    }
    if pc.description:
        obj["description"] = pc.description
    return obj
