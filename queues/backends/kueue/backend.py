"""Kueue (kueue.x-k8s.io/v1beta2) as a :class:`queues.backends.base.SchedulerBackend`.

A job is a suspended batch/v1 Indexed Job or a JobSet labelled for the team's
LocalQueue; Kueue makes a ``Workload`` for it, admits it whole and unsuspends
it. Its status is read from the job, the Workload, the events about both and
the visibility API's queue position (:func:`queues.backends.kueue.jobs.interpret_kueue`).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from queues.backends.base import CancelStep, JobRef
from queues.backends.kueue import jobs, objects
from queues.backends.kueue.model import KueueSimulator
from queues.errors import PermanentError
from queues.jobs import JobSpec, JobStatus
from queues.render import core
from queues.specs import CohortSpec, FlavorSpec, TeamQueueSpec

#: Kinds the Kueue backend manages, in apply order (prune runs in reverse).
KINDS: tuple[tuple[str, str], ...] = (
    (objects.API_VERSION, "ResourceFlavor"),
    (objects.API_VERSION, "Cohort"),
    (objects.API_VERSION, "WorkloadPriorityClass"),
    ("scheduling.k8s.io/v1", "PriorityClass"),
    ("v1", "Namespace"),
    ("v1", "ResourceQuota"),
    (objects.API_VERSION, "ClusterQueue"),
    (objects.API_VERSION, "LocalQueue"),
)


@dataclass
class KueueReads:
    """What a status read found besides the live job: its Workload, the events about
    both (oldest first) and its 0-based queue position while pending."""

    workload: dict | None = None
    events: list = field(default_factory=list)
    position: int | None = None


def _local_queue(live: dict) -> str:
    return ((live.get("metadata") or {}).get("labels") or {}).get(jobs.QUEUE_NAME_LABEL) or ""


def _pending_or_none(port, namespace: str, local_queue: str) -> list[dict] | None:
    """The LocalQueue's pending workloads (visibility API), ``None`` when it answers 404
    (LocalQueue missing or the API not served: positions unknown, not an error)."""
    try:
        return port.pending_workloads(namespace, local_queue)
    except PermanentError as exc:
        if exc.status == 404:
            return None
        raise


def _position_in(pending: list[dict] | None, workload_name: str) -> int | None:
    """0-based position of ``workload_name`` among ``pending``, ``None`` if absent."""
    for index, item in enumerate(pending or ()):
        if (item.get("metadata") or {}).get("name") == workload_name:
            position = item.get("positionInLocalQueue")
            return int(position) if isinstance(position, int) else index
    return None


def _pending(workload: dict) -> bool:
    return not (workload.get("status") or {}).get("admission")


class _KueueNamespace:
    """One pass's reads of a namespace: the Workloads (one list, indexed by owner uid),
    the events about jobs and about Workloads (one list per involved kind), and each
    LocalQueue's pending workloads (one read per LocalQueue, only when a job is not
    admitted)."""

    def __init__(self, port, namespace: str, kinds: Sequence[str]) -> None:
        self.port, self.namespace = port, namespace
        self.workloads = jobs.index_workloads(port.list_workloads(namespace))
        self.events: dict[tuple[str, str], list[dict]] = {}
        for kind in [*kinds, "Workload"]:
            for event in port.list_events(namespace, involved_kind=kind):
                involved = event.get("involvedObject") or {}
                self.events.setdefault((kind, involved.get("name") or ""), []).append(event)
        self._pending: dict[str, list[dict] | None] = {}

    def reads(self, ref: JobRef, live: dict) -> KueueReads:
        meta = live.get("metadata") or {}
        reads = KueueReads()
        reads.workload = (self.workloads.get(meta["uid"]) if meta.get("uid")
                          else jobs.workload_for_job(list(self.workloads.values()), live))
        reads.events = list(self.events.get((ref.kind, ref.name), ()))
        if reads.workload is not None:
            wl_name = reads.workload["metadata"]["name"]
            reads.events += self.events.get(("Workload", wl_name), [])
            if _pending(reads.workload):
                lq = _local_queue(live)
                if lq and lq not in self._pending:
                    self._pending[lq] = _pending_or_none(self.port, self.namespace, lq)
                reads.position = _position_in(self._pending.get(lq), wl_name)
        return reads


class KueueBackend:
    """Kueue: ClusterQueue + LocalQueue per team, Cohorts, ResourceFlavors; suspended
    Jobs/JobSets admitted whole; cancel = deactivate the Workload, then delete."""

    name = "kueue"
    label = "Kueue"
    managed_kinds = KINDS
    job_api_versions = frozenset({jobs.JOB_API_VERSION, jobs.JOBSET_API_VERSION})
    reserved_queue_names: frozenset[str] = frozenset()
    queue_names_shared = False

    def weight_problem(self, weight: Decimal, shown: Any) -> str | None:
        return None  # fairSharing.weight takes any positive decimal

    #: The whole desired set, in apply order (``objects.desired_objects``).
    desired_objects = staticmethod(objects.desired_objects)

    def team_object_keys(self, team: TeamQueueSpec) -> list[tuple[str, str, str, str]]:
        """``[Namespace, ResourceQuota, ClusterQueue, LocalQueue]``."""
        return [
            ("v1", "Namespace", "", team.namespace),
            ("v1", "ResourceQuota", team.namespace, core.RESOURCE_QUOTA_NAME),
            (objects.API_VERSION, "ClusterQueue", "", team.cluster_queue_name),
            (objects.API_VERSION, "LocalQueue", team.namespace, team.local_queue_name),
        ]

    def render_job(self, spec: JobSpec, *, flavor: FlavorSpec) -> dict:
        return jobs.render_kueue_job(spec)  # Kueue injects the flavor's node labels

    def queue_refusal(self, queue: Mapping[str, Any] | None) -> str | None:
        return None  # a stopped ClusterQueue keeps jobs queued; it refuses none

    def team_queue(self, team: str) -> tuple[str, str, str, str] | None:
        return None

    def read_job(self, port, ref: JobRef, live: dict) -> KueueReads:
        """The namespace's Workloads, the events about the job and about its Workload,
        the LocalQueue's pending workloads (only while not admitted): 4 requests."""
        reads = KueueReads(workload=jobs.workload_for_job(port.list_workloads(ref.namespace),
                                                          live))
        reads.events = port.list_events(ref.namespace, ref.name, ref.kind)
        if reads.workload is not None:
            wl_name = reads.workload["metadata"]["name"]
            reads.events += port.list_events(ref.namespace, wl_name, "Workload")
            if _pending(reads.workload):
                lq = _local_queue(live)
                reads.position = _position_in(
                    _pending_or_none(port, ref.namespace, lq) if lq else None, wl_name)
        return reads

    def namespace_reader(self, port, namespace: str, kinds: Sequence[str]) -> _KueueNamespace:
        return _KueueNamespace(port, namespace, kinds)

    def interpret(self, reads: KueueReads | None, *, live: dict | None, now: dt.datetime,
                  cancelled: bool, known_preemption_times: Iterable[dt.datetime] = (),
                  partly_placed_since: dt.datetime | None = None,
                  ) -> tuple[JobStatus, dt.datetime | None]:
        reads = reads or KueueReads()
        return jobs.interpret_kueue(
            job=live, workload=reads.workload, events=reads.events,
            queue_position=reads.position, now=now, cancelled=cancelled,
            known_preemption_times=known_preemption_times), None

    def _workload(self, port, ref: JobRef, live: dict | None = None) -> dict | None:
        if live is None:
            live = {"kind": ref.kind, "metadata": {"name": ref.name, "uid": ref.uid}}
        return jobs.workload_for_job(port.list_workloads(ref.namespace), live)

    def cancel(self, port, ref: JobRef) -> CancelStep:
        """Deactivate the job's Workload (``spec.active: false``), then delete the job.

        Kueue keeps running an admitted job that is merely suspended by hand;
        deactivating its Workload makes Kueue evict it and stop its pods
        (https://kueue.sigs.k8s.io/docs/concepts/workload/#active). The job is
        then deleted (background propagation: its pods follow). One run does it all.
        """
        workload = None
        live = port.get(ref.api_version, ref.kind, ref.name, ref.namespace)
        if live is not None:
            workload = self._workload(port, ref, live)
            if workload is not None and (workload.get("spec") or {}).get("active", True):
                port.deactivate_workload(ref.namespace, workload["metadata"]["name"])
            port.delete_background(ref.api_version, ref.kind, ref.name, ref.namespace)
        return CancelStep("cancelled",
                          "Workload deactivated (spec.active: false), then the job deleted."
                          if workload is not None
                          else "Job deleted (Kueue had no Workload for it yet).")

    def deactivate(self, port, ref: JobRef) -> dict:
        """Merge-patch ``spec.active: false`` on the job's Workload: Kueue evicts it and
        its pods stop, while the Job and the Workload stay. ``PermanentError`` when
        Kueue made no Workload for it."""
        workload = self._workload(port, ref)
        if workload is None:
            raise PermanentError(f"no Kueue Workload found for {ref.namespace}/{ref.name}",
                                 reason="NotFound")
        name = workload["metadata"]["name"]
        patched = port.deactivate_workload(ref.namespace, name)
        return {"backend": self.name, "kind": "Workload", "name": name,
                "active": None if patched is None else patched["spec"].get("active")}

    def simulator(self, *, flavors: Sequence[FlavorSpec], teams: Sequence[TeamQueueSpec],
                  cohorts: Sequence[CohortSpec], node_pools: Sequence) -> KueueSimulator:
        return KueueSimulator(teams, cohorts, node_pools)
