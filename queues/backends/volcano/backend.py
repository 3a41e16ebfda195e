"""Volcano as a :class:`queues.backends.base.SchedulerBackend`.

A team is a Queue (capacity plugin: deserved, capability, guarantee) under its
cohort's Queue; a job is a ``batch.volcano.sh/v1alpha1`` Job whose gang is
``minAvailable`` = every pod. Its status is read from the vcjob, its PodGroup
and its Queue (:func:`queues.backends.volcano.jobs.interpret_volcano`). A vcjob
has no suspend field: cancel is an ``AbortJob`` Command, then (once stopped) a
``TerminateJob`` and the delete.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from queues.backends.base import CancelStep, JobRef
from queues.backends.volcano import jobs, objects, rules
from queues.backends.volcano.model import VolcanoSimulator
from queues.jobs import JobSpec, JobStatus
from queues.specs import CohortSpec, FlavorSpec, TeamQueueSpec

#: Kinds the Volcano backend manages, in apply order.
KINDS: tuple[tuple[str, str], ...] = (
    ("scheduling.k8s.io/v1", "PriorityClass"),
    ("v1", "Namespace"),
    ("v1", "ResourceQuota"),
    (objects.API_VERSION, "Queue"),
)

#: ``JobSpec.kind`` -> how a multi-pod vcjob finds its peers (:data:`jobs.FRAMEWORKS`):
#: an Indexed Job becomes a pytorch-plugin gang (master + workers, RANK/WORLD_SIZE set),
#: a JobSet (headless Service, DNS hostnames) a svc+env gang.
FRAMEWORK = {"job": "pytorch", "jobset": "svc"}


@dataclass
class VolcanoReads:
    """What a status read found besides the live vcjob: its PodGroup and its Queue."""

    podgroup: dict | None = None
    queue: dict | None = None


def _phase(live: Mapping[str, Any] | None) -> str:
    return (((live or {}).get("status") or {}).get("state") or {}).get("phase") or ""


class _VolcanoNamespace:
    """One pass's reads of a namespace: the PodGroups (one list) and each Queue (one
    read per queue, cached)."""

    def __init__(self, port, namespace: str) -> None:
        self.port = port
        self.podgroups = {pg["metadata"]["name"]: pg for pg in port.list(
            jobs.PODGROUP_API_VERSION, "PodGroup", "", namespace)}
        self._queues: dict[str, dict | None] = {}

    def reads(self, ref: JobRef, live: dict) -> VolcanoReads:
        meta = live.get("metadata") or {}
        reads = VolcanoReads()
        if meta.get("uid"):
            reads.podgroup = self.podgroups.get(jobs.podgroup_name(ref.name, meta["uid"]))
        queue_name = (live.get("spec") or {}).get("queue")
        if queue_name:
            if queue_name not in self._queues:
                self._queues[queue_name] = self.port.get(jobs.QUEUE_API_VERSION, "Queue",
                                                         queue_name)
            reads.queue = self._queues[queue_name]
        return reads


class VolcanoBackend:
    """Volcano: hierarchical Queues (capacity plugin); vcjobs with minAvailable = all
    pods; cancel = AbortJob, then TerminateJob and delete."""

    name = "volcano"
    label = "Volcano"
    managed_kinds = KINDS
    job_api_versions = frozenset({jobs.JOB_API_VERSION})
    reserved_queue_names = rules.RESERVED_QUEUE_NAMES
    queue_names_shared = True

    def weight_problem(self, weight: Decimal, shown: Any) -> str | None:
        return rules.weight_problem(weight, shown)

    #: The whole desired set, in apply order (``objects.desired_objects``).
    desired_objects = staticmethod(objects.desired_objects)

    def team_object_keys(self, team: TeamQueueSpec) -> list[tuple[str, str, str, str]]:
        return []  # the team page lists the rows the reconciler recorded

    def render_job(self, spec: JobSpec, *, flavor: FlavorSpec) -> dict:
        """With the flavor's node labels and tolerations, and :data:`FRAMEWORK` of the
        spec's kind."""
        return jobs.render_volcano_job(spec, flavor=flavor, framework=FRAMEWORK[spec.kind])

    def queue_refusal(self, queue: Mapping[str, Any] | None) -> str | None:
        """A closed (or closing) Queue refuses new jobs; a Queue not seen yet does not
        (the reconciler creates it, then the job)."""
        return jobs.queue_refusal(queue) if queue is not None else None

    def team_queue(self, team: str) -> tuple[str, str, str, str] | None:
        return (jobs.QUEUE_API_VERSION, "Queue", "", team)

    def read_job(self, port, ref: JobRef, live: dict) -> VolcanoReads:
        """The vcjob's PodGroup and its Queue: 2 requests."""
        reads = VolcanoReads()
        meta = live.get("metadata") or {}
        if meta.get("uid"):
            reads.podgroup = port.get(jobs.PODGROUP_API_VERSION, "PodGroup",
                                      jobs.podgroup_name(meta["name"], meta["uid"]),
                                      meta.get("namespace"))
        queue_name = (live.get("spec") or {}).get("queue")
        if queue_name:
            reads.queue = port.get(jobs.QUEUE_API_VERSION, "Queue", queue_name)
        return reads

    def namespace_reader(self, port, namespace: str, kinds: Sequence[str]) -> _VolcanoNamespace:
        return _VolcanoNamespace(port, namespace)

    def interpret(self, reads: VolcanoReads | None, *, live: dict | None, now: dt.datetime,
                  cancelled: bool, known_preemption_times: Iterable[dt.datetime] = (),
                  partly_placed_since: dt.datetime | None = None,
                  ) -> tuple[JobStatus, dt.datetime | None]:
        """``partly_placed_since`` comes back as when the portal first saw the gang partly
        placed (``0 < running < minAvailable``, :func:`jobs.is_partly_placed`): the one
        given, or ``now`` on the first such read; ``None`` when the gang is not partly
        placed (the clock is cleared). It is the clock of :data:`jobs.PARTLY_PLACED_AFTER`,
        not the vcjob's phase transition time."""
        reads = reads or VolcanoReads()
        since = None
        if jobs.is_partly_placed(live, reads.podgroup):
            since = partly_placed_since or now
        status = jobs.interpret_volcano(job=live, podgroup=reads.podgroup, now=now,
                                        queue=reads.queue, cancelled=cancelled,
                                        partly_placed_since=since)
        return status, since

    def cancel(self, port, ref: JobRef) -> CancelStep:
        """Two level-triggered steps.

        1. While it still runs: an ``AbortJob`` Command (Volcano kills the pods and
           keeps the vcjob, ``Aborted``): step ``"aborting"``.
        2. Once Volcano reports it stopped (``Aborted`` or finished) - on the next
           run, which ``portal.jobs_sync`` makes for every job being cancelled - a
           ``TerminateJob`` Command, then the vcjob is deleted (its pods, PodGroup
           and Commands follow by owner references): step ``"cancelled"``.
        """
        live = port.get(ref.api_version, ref.kind, ref.name, ref.namespace)
        phase = _phase(live)
        if live is not None and phase not in jobs.STOPPED_PHASES:
            if phase != jobs.ABORTING:
                port.issue_command(jobs.render_command(
                    job=live, action=jobs.ABORT, message="cancelled through the portal"))
            return CancelStep("aborting", "AbortJob command sent; Volcano stops its pods.",
                              timeline_type="Aborting")
        if live is not None:
            if phase == "Aborted":
                port.issue_command(jobs.render_command(
                    job=live, action=jobs.TERMINATE, message="deleted by the portal"))
            port.delete_background(ref.api_version, ref.kind, ref.name, ref.namespace)
        return CancelStep("cancelled", "TerminateJob command sent, then the job deleted.",
                          restates=True)

    def deactivate(self, port, ref: JobRef) -> dict:
        """An ``AbortJob`` Command targeting the live vcjob: Volcano kills the pods and
        keeps the job in ``Aborted``; nothing when it is aborting, stopped or gone."""
        live = port.get(jobs.JOB_API_VERSION, "Job", ref.name, ref.namespace)
        phase = _phase(live)
        done = {"backend": self.name, "kind": "Command", "name": f"{ref.name}-abortjob",
                "action": jobs.ABORT}
        if live is None or phase == jobs.ABORTING or phase in jobs.STOPPED_PHASES:
            return {**done, "skipped": phase or "gone"}
        port.issue_command(jobs.render_command(
            job=live, action=jobs.ABORT, reason="IdleGPUReclaim",
            message="idle GPUs reclaimed by platform staff"))
        return done

    def simulator(self, *, flavors: Sequence[FlavorSpec], teams: Sequence[TeamQueueSpec],
                  cohorts: Sequence[CohortSpec], node_pools: Sequence) -> VolcanoSimulator:
        return VolcanoSimulator.from_specs(flavors=flavors, teams=teams, cohorts=cohorts,
                                           node_pools=node_pools)
