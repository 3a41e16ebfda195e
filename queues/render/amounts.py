"""Quota arithmetic shared by the renderers: one flavor's GPUs, CPU and memory.

A ``FlavorQuota`` states GPUs; CPU and memory follow the flavor's per-GPU host
share unless the quota states them (see ``FlavorQuota``). This module turns a
quota into exact amounts (``Amounts``: GPUs as ``int``, cores and bytes as
``Decimal``) and computes what a cohort tree holds in total, which bounds
what an unlimited borrower can ever get.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal

from queues import quantity
from queues.specs import CohortSpec, FlavorQuota, FlavorSpec, SpecError, TeamQueueSpec

__all__ = [
    "Amounts",
    "admissible_gpus",
    "borrowing_limit",
    "cohort_capacity",
    "cohort_order",
    "cohort_root",
    "flavor_of",
    "lending_limit",
    "memory_is_binary",
    "nominal",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class Amounts:
    """Amounts of one flavor: ``gpus`` (devices, int), ``cpu`` (cores), ``memory`` (bytes)."""

    gpus: int
    cpu: Decimal
    memory: Decimal

    def __add__(self, other: Amounts) -> Amounts:
        return Amounts(
            gpus=self.gpus + other.gpus, cpu=self.cpu + other.cpu, memory=self.memory + other.memory
        )

    @classmethod
    def zero(cls) -> Amounts:
        return cls(gpus=0, cpu=Decimal(0), memory=Decimal(0))

    @classmethod
    def for_gpus(cls, gpus: int, flavor: FlavorSpec) -> Amounts:
        """``gpus`` GPUs with the flavor's per-GPU CPU and memory."""
        return cls(
            gpus=gpus,
            cpu=gpus * quantity.parse(flavor.cpu_per_gpu),
            memory=gpus * quantity.parse(flavor.memory_per_gpu),
        )


def flavor_of(
    quota: FlavorQuota, flavors_by_name: Mapping[str, FlavorSpec], field: str
) -> FlavorSpec:
    """The quota's ``FlavorSpec``; ``SpecError`` if unknown or its GPU resource differs."""
    flavor = flavors_by_name.get(quota.flavor)
    if flavor is None:
        raise SpecError(f"{field}.flavor", f"unknown GPU flavor {quota.flavor!r}")
    if flavor.gpu_resource != quota.gpu_resource:
        raise SpecError(
            f"{field}.gpu_resource",
            f"{quota.gpu_resource!r} differs from flavor {flavor.name!r}'s {flavor.gpu_resource!r}",
        )
    return flavor


def memory_is_binary(quota: FlavorQuota, flavor: FlavorSpec) -> bool:
    """Whether the memory amount was stated with a binary suffix (render as ``Gi``)."""
    return quantity.is_binary(quota.memory if quota.memory is not None else flavor.memory_per_gpu)


def nominal(quota: FlavorQuota, flavor: FlavorSpec) -> Amounts:
    """Nominal amounts: the quota's GPUs, its CPU/memory or ``gpus * per-GPU share``."""
    derived = Amounts.for_gpus(quota.nominal_gpus, flavor)
    return Amounts(
        gpus=quota.nominal_gpus,
        cpu=quantity.parse(quota.cpu) if quota.cpu is not None else derived.cpu,
        memory=quantity.parse(quota.memory) if quota.memory is not None else derived.memory,
    )


def borrowing_limit(quota: FlavorQuota, flavor: FlavorSpec) -> Amounts | None:
    """Borrowing limit: ``borrowing_limit_gpus`` and its per-GPU share; ``None`` = unlimited."""
    if quota.borrowing_limit_gpus is None:
        return None
    return Amounts.for_gpus(quota.borrowing_limit_gpus, flavor)


def lending_limit(quota: FlavorQuota, flavor: FlavorSpec) -> Amounts | None:
    """Lending limit: ``lending_limit_gpus`` and its per-GPU share, capped at nominal.

    Kueue rejects a ClusterQueue whose lendingLimit exceeds its nominalQuota,
    so derived CPU/memory limits never exceed the nominal CPU/memory.
    ``None`` = everything unused may be lent.
    """
    if quota.lending_limit_gpus is None:
        return None
    share = Amounts.for_gpus(quota.lending_limit_gpus, flavor)
    own = nominal(quota, flavor)
    return Amounts(
        gpus=quota.lending_limit_gpus,
        cpu=min(share.cpu, own.cpu),
        memory=min(share.memory, own.memory),
    )


def _parents(cohorts: Iterable[CohortSpec]) -> dict[str, str | None]:
    parents: dict[str, str | None] = {}
    for index, cohort in enumerate(cohorts):
        if cohort.name in parents:
            raise SpecError(f"cohorts[{index}].name", f"cohort {cohort.name!r} listed twice")
        parents[cohort.name] = cohort.parent
    return parents


def cohort_root(name: str, cohorts: Iterable[CohortSpec]) -> str:
    """Root of the cohort tree containing ``name``; ``SpecError`` on a parent cycle.

    A parent that is not among ``cohorts`` is a root (Kueue treats a
    reference to a missing Cohort as an implicit, limit-free cohort).
    """
    parents = _parents(cohorts)
    seen = [name]
    current = name
    while parents.get(current) is not None:
        current = parents[current]  # type: ignore[assignment]
        if current in seen:
            raise SpecError("parent", f"cohort cycle: {' -> '.join([*seen, current])}")
        seen.append(current)
    return current


def admissible_gpus(
    *, team: str, cohort: str | None, flavor: str, nominal: int, borrowing_limit: int | None,
    teams: Iterable[TeamQueueSpec], cohorts: Iterable[CohortSpec],
) -> int:
    """The most GPUs of ``flavor`` team ``team`` could ever be admitted with: the one
    home of "the most a team can ever be admitted" (the submit check, the quota preview).

    ``nominal + min(borrowing_limit, what the rest of the cohort tree may lend)``; the
    rest may lend, per team, its lending limit or else its whole nominal (Kueue lends
    only nominal quota: https://kueue.sigs.k8s.io/docs/concepts/cohort/). Without a
    cohort it is ``nominal``. ``nominal`` / ``borrowing_limit`` are the team's own (as
    granted, or as they would be); ``teams`` / ``cohorts`` the cluster's specs. The
    namespace ResourceQuota's cap (``core.max_admitted``) is an upper bound of this.
    """
    if cohort is None:
        return nominal
    cohorts = list(cohorts)
    tree = cohort_root(cohort, cohorts)
    lendable = 0
    for other in teams:
        if other.slug == team or other.cohort is None or cohort_root(other.cohort,
                                                                     cohorts) != tree:
            continue
        for quota in other.quotas:
            if quota.flavor == flavor:
                lendable += (quota.nominal_gpus if quota.lending_limit_gpus is None
                             else quota.lending_limit_gpus)
    borrowable = lendable if borrowing_limit is None else min(borrowing_limit, lendable)
    return nominal + borrowable


def cohort_order(cohorts: Iterable[CohortSpec]) -> list[CohortSpec]:
    """Cohorts parents first (then by name): a deterministic apply order."""
    by_name = {cohort.name: cohort for cohort in cohorts}
    _parents(by_name.values())
    depth: dict[str, int] = {}
    for name in by_name:
        level, current, seen = 0, name, {name}
        while by_name.get(current) is not None and by_name[current].parent is not None:
            current = by_name[current].parent  # type: ignore[assignment]
            if current in seen:
                raise SpecError("parent", f"cohort cycle through {current!r}")
            seen.add(current)
            level += 1
        depth[name] = level
    return sorted(by_name.values(), key=lambda c: (depth[c.name], c.name))


def cohort_capacity(
    cohort: str,
    *,
    teams: Iterable[TeamQueueSpec],
    cohorts: Iterable[CohortSpec],
    flavors_by_name: Mapping[str, FlavorSpec],
) -> dict[str, Amounts]:
    """Total nominal amounts per flavor name in the cohort *tree* containing ``cohort``.

    Sum of the nominal quotas of every team whose cohort is in the tree plus
    every shared pool in the tree: the most quota any member can ever be
    admitted with in that flavor, since Kueue only lends unused nominal quota
    (https://kueue.sigs.k8s.io/docs/concepts/cohort/). Used to bound the
    ResourceQuota of a team whose borrowing is unlimited.
    """
    cohorts = list(cohorts)
    root = cohort_root(cohort, cohorts)
    members = {c.name for c in cohorts if cohort_root(c.name, cohorts) == root} | {root}
    totals: dict[str, Amounts] = {}

    def add(quotas: Iterable[FlavorQuota], field: str) -> None:
        for index, quota in enumerate(quotas):
            flavor = flavor_of(quota, flavors_by_name, f"{field}[{index}]")
            totals[quota.flavor] = totals.get(quota.flavor, Amounts.zero()) + nominal(quota, flavor)

    for team in teams:
        if team.cohort is not None and cohort_root(team.cohort, cohorts) == root:
            add(team.quotas, f"{team.slug}.quotas")
    for spec in cohorts:
        if spec.name in members:
            add(spec.shared_pool, f"{spec.name}.shared_pool")
    return totals
