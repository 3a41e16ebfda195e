"""The one interface a scheduler backend implements (Kueue, Volcano, ...).

The portal never asks which backend a cluster runs: it asks the registry
(:func:`queues.backends.get`, or :func:`queues.backends.of_manifest` for a job
already rendered) for the :class:`SchedulerBackend` and calls it. Everything a
backend knows lives in its package, ``queues/backends/<name>/``:

* ``objects.py`` - the desired set (queues, flavors, priority classes) from the specs;
* ``jobs.py``    - the job manifest, what the cluster says about it (status), commands;
* ``model.py``   - its scheduler model for the what-if (a ``SimulatorBase``);
* ``backend.py`` - the :class:`SchedulerBackend` tying them together, with the
  cluster reads and writes of a job (through the cluster port) and its rules.

Pure like the rest of ``queues``: no Django. ``port`` below is the cluster port
(:class:`queues.cluster.KubernetesCluster` or a fake with the same methods);
every method that takes one may raise :class:`queues.errors.ClusterError`.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Protocol, runtime_checkable

from queues.jobs import JobSpec, JobStatus
from queues.specs import CohortSpec, FlavorSpec, PriorityClassSpec, TeamQueueSpec

__all__ = ["CancelStep", "JobRef", "NamespaceReader", "SchedulerBackend"]


@dataclass(frozen=True, slots=True)
class JobRef:
    """Which job object on the cluster: from its stored manifest, plus the uid the
    cluster gave it (``""`` until created) and the portal's job id (its label)."""

    api_version: str
    kind: str
    name: str
    namespace: str
    uid: str = ""
    job_id: str = ""

    @classmethod
    def of(cls, manifest: Mapping[str, Any], *, uid: str = "", job_id: str = "") -> JobRef:
        meta = manifest["metadata"]
        return cls(manifest["apiVersion"], manifest["kind"], meta["name"],
                   meta.get("namespace") or "", uid, job_id)


@dataclass(frozen=True, slots=True)
class CancelStep:
    """What one cancel run did on the cluster.

    ``step``: ``"cancelled"`` (the job is gone, or going: nothing more to do) or
    a backend's intermediate step (Volcano's ``"aborting"``: run again later);
    ``detail``: one sentence for the timeline; ``timeline_type``: the timeline
    entry's type (``"Cancelled"`` or, say, ``"Aborting"``); ``restates``: this
    final step follows an intermediate one that already showed the job
    ``Cancelled``, whose message it replaces.
    """

    step: str
    detail: str
    timeline_type: str = "Cancelled"
    restates: bool = False

    @property
    def done(self) -> bool:
        return self.step == "cancelled"


class NamespaceReader(Protocol):
    """One pass's reads of a namespace, shared by every job of a backend synced in it."""

    def reads(self, ref: JobRef, live: dict) -> Any:
        """What :meth:`SchedulerBackend.interpret` needs of the live job ``live``."""


@runtime_checkable
class SchedulerBackend(Protocol):
    """A scheduler backend: its objects, its jobs, its rules and its model."""

    #: Registry key and ``Cluster.backend`` value (``"kueue"``); ``label`` for people.
    name: str
    label: str
    #: ``(apiVersion, kind)`` of the objects :meth:`desired_objects` writes, in apply
    #: order (prune runs in reverse).
    managed_kinds: tuple[tuple[str, str], ...]
    #: apiVersions of the job manifests :meth:`render_job` writes.
    job_api_versions: frozenset[str]
    #: Queue names the scheduler creates itself (a team or cohort may not take them).
    reserved_queue_names: frozenset[str]
    #: Teams and cohorts share one namespace of queue names (both become queues).
    queue_names_shared: bool

    # --- rules (the specs' home for what this backend adds) -------------------------

    def weight_problem(self, weight: Decimal, shown: Any) -> str | None:
        """Why ``weight`` (> 0, already a number; ``shown`` as the user wrote it) cannot
        be a fair-sharing weight here, or ``None``."""

    # --- the desired set --------------------------------------------------------------

    def desired_objects(self, *, flavors: Iterable[FlavorSpec],
                        cohorts: Iterable[CohortSpec] = (),
                        priority_classes: Iterable[PriorityClassSpec] = (),
                        teams: Iterable[TeamQueueSpec] = ()) -> list[dict]:
        """Every manifest the cluster should hold, in apply order. Raises ``SpecError``."""

    def team_object_keys(self, team: TeamQueueSpec) -> list[tuple[str, str, str, str]]:
        """The keys ``(apiVersion, kind, namespace, name)`` of the objects every team owns,
        in apply order, as the renderers name them (for the team page before the first
        reconcile); ``[]`` when the page shows only what the reconciler recorded."""

    # --- jobs -------------------------------------------------------------------------

    def render_job(self, spec: JobSpec, *, flavor: FlavorSpec) -> dict:
        """The manifest of a checked job. Raises ``SpecError``."""

    def queue_refusal(self, queue: Mapping[str, Any] | None) -> str | None:
        """Why the team's queue (as last observed; ``None``: not seen) refuses new jobs."""

    def team_queue(self, team: str) -> tuple[str, str, str, str] | None:
        """The key ``(apiVersion, kind, namespace, name)`` of team ``team``'s queue
        whose state :meth:`queue_refusal` reads; ``None`` when queues never refuse."""

    def read_job(self, port, ref: JobRef, live: dict) -> Any:
        """Read what :meth:`interpret` needs of the live job, request by request."""

    def namespace_reader(self, port, namespace: str, kinds: Sequence[str]) -> NamespaceReader:
        """List what :meth:`interpret` needs for every job of ``kinds`` in ``namespace``
        at once (a fixed number of requests whatever the number of jobs)."""

    def interpret(self, reads: Any, *, live: dict | None, now: dt.datetime, cancelled: bool,
                  known_preemption_times: Iterable[dt.datetime] = (),
                  partly_placed_since: dt.datetime | None = None,
                  ) -> tuple[JobStatus, dt.datetime | None]:
        """``(JobStatus, partly_placed_since)`` from what was read (pure). ``reads`` is
        ``None`` when there was no live job."""

    def cancel(self, port, ref: JobRef) -> CancelStep:
        """One level-triggered cancel run: stop the job's pods, then delete it."""

    def deactivate(self, port, ref: JobRef) -> dict:
        """Stop the job's pods without deleting it (idle-GPU reclaim); what was done."""

    # --- the scheduler model (what-if) -----------------------------------------------

    def simulator(self, *, flavors: Sequence[FlavorSpec], teams: Sequence[TeamQueueSpec],
                  cohorts: Sequence[CohortSpec], node_pools: Sequence):
        """A fresh :class:`queues.schedmodel.SimulatorBase` of this scheduler."""
