"""Labels that mark the portal's objects on the cluster, in one place.

Every rendered object carries ``app.kubernetes.io/managed-by`` and
``app.kubernetes.io/part-of`` (recommended labels,
https://kubernetes.io/docs/concepts/overview/working-with-objects/common-labels/)
and ``portal.gpu/kind``. Gang jobs (batch/v1 Job, JobSet) and their pods carry
``job_labels(team, job)``: the team label, ``portal.gpu/kind: job`` and
``portal.gpu/job: <portal job id>`` (how DCGM series and events are tied
back to the portal's job). Objects that belong to a team (Namespace,
ResourceQuota, ClusterQueue, LocalQueue, Volcano team Queue; cluster-scoped
ones included) also carry ``portal.gpu/team: <slug>``. Shared objects
(ResourceFlavor, Cohort, PriorityClass, WorkloadPriorityClass, Volcano cohort
Queue) carry no team label; their ``portal.gpu/kind`` tells them apart.

The reconciler prunes only objects matching ``managed_selector()`` plus a
team or kind selector, so nothing unlabelled is ever deleted.

``LABEL_DOMAIN`` is the one place the portal's own label prefix is spelled.
"""

from __future__ import annotations

__all__ = [
    "APP_NAME",
    "DISPLAY_NAME_ANNOTATION",
    "KIND_COHORT",
    "JOB_LABEL",
    "KIND_FLAVOR",
    "KIND_JOB",
    "KIND_LABEL",
    "KIND_PRIORITY_CLASS",
    "KIND_TEAM",
    "LABEL_DOMAIN",
    "MANAGED_BY_LABEL",
    "PART_OF_LABEL",
    "TEAM_LABEL",
    "job_labels",
    "job_selector",
    "managed_selector",
    "shared_labels",
    "shared_selector",
    "team_labels",
    "team_selector",
]

APP_NAME = "gpu-quota-portal"
LABEL_DOMAIN = "portal.gpu"

MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
PART_OF_LABEL = "app.kubernetes.io/part-of"
TEAM_LABEL = f"{LABEL_DOMAIN}/team"
KIND_LABEL = f"{LABEL_DOMAIN}/kind"
DISPLAY_NAME_ANNOTATION = f"{LABEL_DOMAIN}/display-name"

KIND_TEAM = "team"
KIND_FLAVOR = "gpu-flavor"
KIND_COHORT = "cohort"
KIND_PRIORITY_CLASS = "priority-class"
KIND_JOB = "job"
JOB_LABEL = f"{LABEL_DOMAIN}/job"
SHARED_KINDS = (KIND_FLAVOR, KIND_COHORT, KIND_PRIORITY_CLASS)


def _base() -> dict[str, str]:
    return {MANAGED_BY_LABEL: APP_NAME, PART_OF_LABEL: APP_NAME}


def team_labels(slug: str) -> dict[str, str]:
    """Labels of an object owned by team ``slug``."""
    return {**_base(), KIND_LABEL: KIND_TEAM, TEAM_LABEL: slug}


def shared_labels(kind: str) -> dict[str, str]:
    """Labels of a shared object; ``kind`` is one of ``SHARED_KINDS``."""
    if kind not in SHARED_KINDS:
        raise ValueError(f"unknown shared kind {kind!r}")
    return {**_base(), KIND_LABEL: kind}


def managed_selector() -> str:
    """Label selector matching every object the portal manages."""
    return f"{MANAGED_BY_LABEL}={APP_NAME}"


def team_selector(slug: str) -> str:
    """Label selector matching the objects of team ``slug``."""
    return f"{managed_selector()},{TEAM_LABEL}={slug}"


def shared_selector(kind: str) -> str:
    """Label selector matching the shared objects of ``kind``."""
    return f"{managed_selector()},{KIND_LABEL}={kind}"


def job_labels(team: str, job: str) -> dict[str, str]:
    """Labels of a gang job of team ``team`` (and of its pods); ``job`` is the portal's job id."""
    return {**_base(), KIND_LABEL: KIND_JOB, TEAM_LABEL: team, JOB_LABEL: job}


def job_selector(team: str, job: str | None = None) -> str:
    """Label selector matching the jobs of ``team`` (one job when ``job`` is given)."""
    selector = f"{managed_selector()},{KIND_LABEL}={KIND_JOB},{TEAM_LABEL}={team}"
    return f"{selector},{JOB_LABEL}={job}" if job is not None else selector
