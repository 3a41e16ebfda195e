"""The scheduler backends and their registry.

One package per backend (``kueue/``, ``volcano/``), each with a ``backend.py``
whose object implements :class:`queues.backends.base.SchedulerBackend`. The
portal asks this registry, never compares backend names:

* :func:`get` - the backend of a name (``Cluster.backend``);
* :func:`of_manifest` - the backend that rendered a stored job manifest (a
  cluster can switch backends while older jobs still run);
* :func:`names` / :func:`choices` - every backend, for settings and model choices;
* :data:`MANAGED_KINDS` - every kind any backend writes (what prune looks at).

Adding a backend: a new package here with its ``backend.py``, and one line in
:data:`BACKENDS` below.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from queues.backends.base import CancelStep, JobRef, SchedulerBackend
from queues.backends.kueue.backend import KueueBackend
from queues.backends.volcano.backend import VolcanoBackend

__all__ = [
    "BACKENDS",
    "DEFAULT",
    "MANAGED_KINDS",
    "CancelStep",
    "JobRef",
    "SchedulerBackend",
    "choices",
    "get",
    "names",
    "of_manifest",
]

#: Every backend, by name, in the order people see them.
BACKENDS: dict[str, SchedulerBackend] = {
    backend.name: backend for backend in (KueueBackend(), VolcanoBackend())
}
#: The backend of a new cluster.
DEFAULT = "kueue"

#: Every kind any backend manages, in apply order (each backend's order, a kind
#: shared by two counted once): what prune looks at, so switching a cluster's
#: backend removes the other backend's objects.
MANAGED_KINDS: tuple[tuple[str, str], ...] = tuple(dict.fromkeys(
    kind for backend in BACKENDS.values() for kind in backend.managed_kinds))


def names() -> tuple[str, ...]:
    """Every backend's name (``("kueue", "volcano")``)."""
    return tuple(BACKENDS)


def choices() -> list[tuple[str, str]]:
    """``[(name, label), ...]`` for a model field's or a form's choices."""
    return [(backend.name, backend.label) for backend in BACKENDS.values()]


def get(name: str) -> SchedulerBackend:
    """The backend called ``name``; ``ValueError`` naming the known ones otherwise."""
    try:
        return BACKENDS[name]
    except KeyError:
        raise ValueError(f"unknown scheduler backend {name!r}; "
                         f"one of: {', '.join(BACKENDS)}") from None


def of_manifest(manifest: Mapping[str, Any]) -> SchedulerBackend:
    """The backend whose :meth:`~SchedulerBackend.render_job` wrote ``manifest``."""
    api_version = manifest.get("apiVersion")
    for backend in BACKENDS.values():
        if api_version in backend.job_api_versions:
            return backend
    raise ValueError(f"no scheduler backend renders jobs of apiVersion {api_version!r}")
