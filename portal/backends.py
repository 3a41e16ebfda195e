"""The one place the portal picks a scheduler backend (see :mod:`queues.backends`).

Services and selectors call :func:`backend_for` with a cluster, or
:func:`backend_of_job` with a job whose manifest is stored (it was rendered by
the backend its cluster had then), and call the backend's methods: no code in
``portal/`` compares backend names or apiVersions.
"""

from __future__ import annotations

from queues import backends
from queues.backends import JobRef, SchedulerBackend

__all__ = ["JobRef", "SchedulerBackend", "backend_for", "backend_of_job", "job_ref"]


def backend_for(cluster) -> SchedulerBackend:
    """The backend of ``cluster`` (a :class:`portal.models.Cluster`, or its backend name)."""
    return backends.get(cluster if isinstance(cluster, str) else cluster.backend)


def backend_of_job(job) -> SchedulerBackend:
    """The backend that rendered ``job``'s stored manifest."""
    return backends.of_manifest(job.manifest)


def job_ref(job) -> JobRef:
    """Which object on the cluster ``job`` (with a manifest) is."""
    return JobRef.of(job.manifest, uid=job.cluster_uid or "", job_id=str(job.pk))
