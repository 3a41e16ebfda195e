"""Kueue's admission, borrowing, lending, preemption and reclaim, simulated.

Input: the portal's specs (``TeamQueueSpec`` = ClusterQueue, ``CohortSpec`` =
Cohort, ``FlavorQuota`` = ``flavors[].resources[]`` of the GPU resource) and
optional ``NodePool``s. Only the GPU resource of each flavor is simulated (CPU
and memory quotas follow GPUs in the portal's renderers, so GPUs decide).

Quota arithmetic is a port of Kueue's ``pkg/cache/scheduler/resource_node.go``
(kubernetes-sigs/kueue, v1beta2 hierarchical cohorts):

* a ClusterQueue's ``SubtreeQuota`` is its ``nominalQuota``; a Cohort's is its
  own ``nominalQuota`` (the shared pool) plus, for each child, the child's
  ``SubtreeQuota`` minus its ``localQuota``;
* ``localQuota = max(0, SubtreeQuota - lendingLimit)`` (0 without a lending
  limit): capacity never lent to the parent;
* ``available(node) = localAvailable + min(parentAvailable, stored - usedInParent
  + borrowingLimit)`` (without a borrowing limit just ``parentAvailable``), at the
  root ``SubtreeQuota - Usage``;
* ``potentialAvailable`` is the same with no usage: beyond it a workload can
  never be admitted (``ExceedsMaxQuota``);
* usage above ``localQuota`` bubbles up to the parent.

Scheduling follows ``pkg/scheduler``: each cycle takes the head of every
ClusterQueue (BestEffortFIFO: priority, then creation time), orders heads that do
not borrow first, then by priority and age, and admits each that fits, with the
flavors tried in the ClusterQueue's order (``whenCanBorrow: MayStopSearch``,
``whenCanPreempt: TryNextFlavor``). A head that does not fit is set aside with
every equivalent workload of its queue (same shape and priority: Kueue's
scheduling-equivalence hashing) until quota is released in its cohort, so it
never blocks the rest. Gangs are all-or-nothing: one pod set ``main`` of
``workers`` pods, admitted whole.

Preemption follows Kueue's classical preemptor (``pkg/scheduler/preemption``):
candidates are lower-priority workloads in the same ClusterQueue
(``withinClusterQueue``) and workloads of ClusterQueues in the cohort that are
borrowing (``reclaimWithinCohort``; reclaim only while the preemptor stays
within its nominal quota, or ``borrowWithinCohort: LowerPriority`` below the
threshold); ordered other queues first, lower priority first, most recently
admitted first; removed greedily until the workload fits, then added back in
reverse order while it still fits. Victims free their quota at once and the
preemptor is admitted in the same instant; victims are back in their queue
``requeue_delay`` seconds later.

The simulator's own addition is a node check: with a ``NodePool`` for a flavor
the gang's pods must also fit on its nodes (first-fit, units per node), so a
worker larger than any node is never admitted and a fragmented flavor waits.

Conditions and messages are Kueue's (``QuotaReserved``, ``Admitted``,
``Evicted``, ``Preempted``, ``Requeued``, ``Finished``; reasons
``WaitingForQuota``, ``ExceedsMaxQuota``, ``WaitingForPreemptedWorkloads``,
``InClusterQueue``, ``InCohortReclamation``...).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from dataclasses import dataclass, field

from queues.schedmodel.core import SimulatorBase, WorkloadRecord
from queues.schedmodel.model import NodePool, job_uid
from queues.specs import CohortSpec, SpecError, TeamQueueSpec

__all__ = ["HUMAN_PREEMPTION_REASONS", "KueueSimulator"]

#: ``HumanReadablePreemptionReasons`` of kueue pkg/scheduler/preemption/preemption.go.
HUMAN_PREEMPTION_REASONS = {
    "InClusterQueue": "prioritization in the ClusterQueue",
    "InCohortReclamation": "reclamation within the cohort",
    "InCohortReclaimWhileBorrowing": "reclamation within the cohort while borrowing",
}
#: batch/v1 Job condition messages that Kueue copies into ``Finished``.
_FINISHED_MESSAGES = {
    "Succeeded": "Reached expected number of succeeded pods",
    "Failed": "Job has reached the specified backoff limit",
}
_MAX_CYCLES_PER_INSTANT = 100_000

FIT, PREEMPT, NOFIT = "Fit", "Preempt", "NoFit"


@dataclass
class _Quota:
    nominal: int
    borrowing_limit: int | None
    lending_limit: int | None
    resource: str


@dataclass(eq=False)
class _Node:
    """A ClusterQueue or Cohort in Kueue's resource tree (GPU units per flavor)."""

    name: str
    is_cq: bool
    parent: _Node | None = None
    cohorts: list[_Node] = field(default_factory=list)
    cqs: list[_ClusterQueue] = field(default_factory=list)
    quotas: dict[str, _Quota] = field(default_factory=dict)
    subtree: dict[str, int] = field(default_factory=dict)
    usage: dict[str, int] = field(default_factory=dict)

    def local_quota(self, flavor: str) -> int:
        quota = self.quotas.get(flavor)
        if quota is None or quota.lending_limit is None:
            return 0
        return max(0, self.subtree.get(flavor, 0) - quota.lending_limit)

    def local_available(self, flavor: str) -> int:
        return max(0, self.local_quota(flavor) - self.usage.get(flavor, 0))

    def available(self, flavor: str) -> int:
        """Units this node can still use in ``flavor`` (Kueue ``available``)."""
        if self.parent is None:
            return self.subtree.get(flavor, 0) - self.usage.get(flavor, 0)
        parent_available = self.parent.available(flavor)
        quota = self.quotas.get(flavor)
        if quota is not None and quota.borrowing_limit is not None:
            local = self.local_quota(flavor)
            stored = self.subtree.get(flavor, 0) - local
            used_in_parent = max(0, self.usage.get(flavor, 0) - local)
            parent_available = min(stored - used_in_parent + quota.borrowing_limit,
                                   parent_available)
        return self.local_available(flavor) + parent_available

    def potential_available(self, flavor: str) -> int:
        """Most units this node could use with nothing else running."""
        if self.parent is None:
            return self.subtree.get(flavor, 0)
        avail = self.local_quota(flavor) + self.parent.potential_available(flavor)
        quota = self.quotas.get(flavor)
        if quota is not None and quota.borrowing_limit is not None:
            avail = min(self.subtree.get(flavor, 0) + quota.borrowing_limit, avail)
        return avail

    def add_usage(self, flavor: str, value: int) -> None:
        local_available = self.local_available(flavor)
        self.usage[flavor] = self.usage.get(flavor, 0) + value
        if self.parent is not None and value > local_available:
            self.parent.add_usage(flavor, value - local_available)

    def remove_usage(self, flavor: str, value: int) -> None:
        stored_in_parent = self.usage.get(flavor, 0) - self.local_quota(flavor)
        self.usage[flavor] = self.usage.get(flavor, 0) - value
        if stored_in_parent <= 0 or self.parent is None:
            return
        self.parent.remove_usage(flavor, min(value, stored_in_parent))

    def within_nominal(self, flavor: str) -> bool:
        return self.subtree.get(flavor, 0) >= self.usage.get(flavor, 0)

    def root(self) -> _Node:
        node = self
        while node.parent is not None:
            node = node.parent
        return node

    def path(self) -> str:
        """``/root/.../name``, as Kueue's ``buildCQPath``."""
        parts, node = [], self
        while node is not None:
            parts.append(node.name)
            node = node.parent
        return "/" + "/".join(reversed(parts))


@dataclass(eq=False)
class _ClusterQueue(_Node):
    spec: TeamQueueSpec | None = None
    order: list[str] = field(default_factory=list)  # flavors in preference order
    active: dict[tuple, list] = field(default_factory=dict)
    inadmissible: dict[tuple, list] = field(default_factory=dict)
    admitted: dict[str, WorkloadRecord] = field(default_factory=dict)

    def head(self) -> tuple | None:
        best = None
        for key in list(self.active):
            heap = self.active[key]
            if not heap:
                del self.active[key]
            elif best is None or heap[0] < best:
                best = heap[0]
        return best

    def requeue(self) -> None:
        for key, items in self.inadmissible.items():
            heap = self.active.setdefault(key, [])
            heap.extend(items)
            heapq.heapify(heap)
        self.inadmissible.clear()


@dataclass
class _Assignment:
    mode: str
    flavor: str | None = None
    borrows: bool = False
    targets: list[tuple[WorkloadRecord, str]] = field(default_factory=list)
    reason: str = ""
    message: str = ""


def _equivalence(record: WorkloadRecord) -> tuple:
    job = record.job
    return (job.flavor or "", job.gpu_resource, job.workers, job.gpus_per_worker, job.priority)


def _sort_key(record: WorkloadRecord) -> tuple:
    return (-record.job.priority, record.submitted, record.seq, record.key)


def workload_uid(record: WorkloadRecord) -> str:
    """The simulated Workload's UID (deterministic; the Job's is ``job.uid``)."""
    return job_uid(record.job.namespace, f"{record.job.name}.workload")


class KueueSimulator(SimulatorBase):
    """Kueue semantics over ClusterQueues and Cohorts (see the module doc).

    ``teams``: one ClusterQueue each (named ``slug``; jobs reach it through the
    LocalQueue of the same name). ``cohorts``: Cohort specs; a cohort named by a
    team or a parent but not given gets an empty implicit Cohort, as in Kueue.
    ``node_pools``: optional nodes per flavor. ``requeue_delay``: seconds before a
    preempted workload is back in its queue (see ``SimulatorBase._evict``).
    Raises ``SpecError`` naming the field for a duplicated slug or cohort, a
    cohort cycle, or a node pool whose resource differs from the quota's.
    """

    def __init__(
        self,
        teams: Iterable[TeamQueueSpec],
        cohorts: Iterable[CohortSpec] = (),
        node_pools: Iterable[NodePool] = (),
        *,
        requeue_delay: float = 1.0,
    ) -> None:
        super().__init__(node_pools, requeue_delay=requeue_delay)
        self.cluster_queues: dict[str, _ClusterQueue] = {}
        self.cohorts: dict[str, _Node] = {}
        self._requeue_roots: set[int] = set()
        cohort_specs = list(cohorts)
        for index, spec in enumerate(cohort_specs):
            if spec.name in self.cohorts:
                raise SpecError(f"cohorts[{index}].name", f"cohort {spec.name!r} listed twice")
            node = _Node(spec.name, is_cq=False)
            for quota in spec.shared_pool:
                node.quotas[quota.flavor] = _Quota(
                    quota.nominal_gpus, quota.borrowing_limit_gpus,
                    quota.lending_limit_gpus, quota.gpu_resource,
                )
            self.cohorts[spec.name] = node
        for spec in cohort_specs:
            if spec.parent is not None:
                self._link(self.cohorts[spec.name], self._cohort(spec.parent))
        for index, team in enumerate(teams):
            if team.slug in self.cluster_queues:
                raise SpecError(f"teams[{index}].slug", f"team {team.slug!r} listed twice")
            cq = _ClusterQueue(team.slug, is_cq=True, spec=team)
            for quota in team.quotas:
                cq.quotas[quota.flavor] = _Quota(
                    quota.nominal_gpus, quota.borrowing_limit_gpus,
                    quota.lending_limit_gpus, quota.gpu_resource,
                )
                cq.order.append(quota.flavor)
                pool = self.nodes.pools.get(quota.flavor)
                if pool is not None and pool.gpu_resource != quota.gpu_resource:
                    raise SpecError(
                        f"teams[{index}].quotas", f"flavor {quota.flavor!r} serves "
                        f"{pool.gpu_resource}, the quota says {quota.gpu_resource}",
                    )
            if team.cohort is not None:
                self._link(cq, self._cohort(team.cohort))
            self.cluster_queues[team.slug] = cq
            self._known_queues.add(team.slug)
        for node in self.cohorts.values():
            seen, current = {node.name}, node.parent
            while current is not None:
                if current.name in seen:
                    raise SpecError("cohorts", f"cohort cycle through {current.name!r}")
                seen.add(current.name)
                current = current.parent
        for node in self._roots():
            self._sum_subtree(node)
        for cq in self.cluster_queues.values():
            if cq.parent is None:
                self._sum_subtree(cq)

    # ------------------------------------------------------------- structure

    def _cohort(self, name: str) -> _Node:
        if name not in self.cohorts:
            self.cohorts[name] = _Node(name, is_cq=False)
        return self.cohorts[name]

    @staticmethod
    def _link(child: _Node, parent: _Node) -> None:
        child.parent = parent
        (parent.cqs if child.is_cq else parent.cohorts).append(child)

    def _roots(self) -> list[_Node]:
        return [node for _, node in sorted(self.cohorts.items()) if node.parent is None]

    def _sum_subtree(self, node: _Node) -> None:
        node.subtree = {flavor: quota.nominal for flavor, quota in node.quotas.items()}
        for child in [*node.cohorts, *node.cqs]:
            self._sum_subtree(child)
            for flavor, amount in child.subtree.items():
                node.subtree[flavor] = (
                    node.subtree.get(flavor, 0) + amount - child.local_quota(flavor)
                )

    def _tree_cqs(self, root: _Node) -> list[_ClusterQueue]:
        if root.is_cq:
            return [root]  # type: ignore[list-item]
        out: list[_ClusterQueue] = list(root.cqs)
        for child in root.cohorts:
            out.extend(self._tree_cqs(child))
        return out

    # ----------------------------------------------------------- public reads

    def available(self, queue: str, flavor: str) -> int:
        """GPU units ``queue`` could be admitted with in ``flavor`` right now
        (Kueue ``available``: unused nominal, plus what the cohort can lend
        within the borrowing limit). Raises ``KeyError`` for an unknown queue."""
        return self.cluster_queues[queue].available(flavor)

    def potential_available(self, queue: str, flavor: str) -> int:
        """Most GPU units ``queue`` could ever be admitted with in ``flavor``."""
        return self.cluster_queues[queue].potential_available(flavor)

    def workload_status(self, key: str) -> dict:
        """The simulated Workload's status in Kueue's shape: ``{"conditions": [...],
        "admission": {"clusterQueue", "podSetAssignments": [{"name": "main",
        "flavors": {resource: flavor}, "count"}]} or None}``."""
        record = self.workloads[key]
        admission = None
        if record.state == "Admitted":
            admission = {
                "clusterQueue": record.job.queue_name,
                "podSetAssignments": [{
                    "name": "main",
                    "flavors": {record.job.gpu_resource: record.flavor},
                    "count": record.job.workers,
                }],
            }
        return {"conditions": list(record.conditions.values()), "admission": admission}

    # ----------------------------------------------------------- base hooks

    def _usage_of(self, queue: str) -> dict[str, tuple[int, int]]:
        cq = self.cluster_queues[queue]
        return {
            flavor: (cq.usage.get(flavor, 0),
                     max(0, cq.usage.get(flavor, 0) - cq.quotas[flavor].nominal))
            for flavor in cq.order
        }

    def _enqueue(self, record: WorkloadRecord) -> None:
        cq = self.cluster_queues[record.job.queue_name]
        heapq.heappush(cq.active.setdefault(_equivalence(record), []),
                       (*_sort_key(record), record.key))

    def _remove_pending(self, record: WorkloadRecord) -> None:
        cq = self.cluster_queues[record.job.queue_name]
        for bucket in (cq.active, cq.inadmissible):
            items = bucket.get(_equivalence(record))
            if items:
                kept = [item for item in items if item[-1] != record.key]
                heapq.heapify(kept)
                bucket[_equivalence(record)] = kept

    def _release(self, record: WorkloadRecord) -> None:
        cq = self.cluster_queues[record.job.queue_name]
        cq.remove_usage(record.flavor, record.job.total_gpus)
        del cq.admitted[record.key]
        self._requeue_roots.add(id(cq.root()))

    def _on_finished(self, record: WorkloadRecord) -> None:
        reason = record.job.outcome
        self._condition(record, "Finished", "True", reason, _FINISHED_MESSAGES[reason])
        self._event(record, "finished", flavor=record.flavor, reason=reason,
                    message=_FINISHED_MESSAGES[reason])

    # ------------------------------------------------------------ scheduling

    def _flush_requeues(self) -> None:
        if not self._requeue_roots:
            return
        for cq in self.cluster_queues.values():
            if cq.inadmissible and id(cq.root()) in self._requeue_roots:
                cq.requeue()
        self._requeue_roots.clear()

    def _schedule(self) -> None:
        ordered = [self.cluster_queues[name] for name in sorted(self.cluster_queues)]
        for _ in range(_MAX_CYCLES_PER_INSTANT):
            self._flush_requeues()
            heads = []
            for cq in ordered:
                head = cq.head()
                if head is not None:
                    record = self.workloads[head[-1]]
                    assignment = self._assign(cq, record)
                    heads.append(((assignment.borrows, *head), cq, record, assignment))
            if not heads:
                return
            heads.sort(key=lambda item: item[0])
            touched: set[int] = set()
            for _, cq, record, assignment in heads:
                root = id(cq.root())
                if root in touched or (touched and self.nodes.pools):
                    assignment = self._assign(cq, record)
                if assignment.mode == FIT:
                    self._admit(cq, record, assignment)
                    touched.add(root)
                elif assignment.mode == PREEMPT:
                    touched.add(root)
                    self._issue_preemptions(cq, record, assignment)
                    after = self._assign(cq, record)
                    if after.mode == FIT:
                        self._admit(cq, record, after)
                    else:
                        self._set_aside(cq, record, after)
                else:
                    self._set_aside(cq, record, assignment)
        raise RuntimeError(f"scheduling did not settle at t={self.now}")

    def _set_aside(self, cq: _ClusterQueue, record: WorkloadRecord,
                   assignment: _Assignment) -> None:
        """NoFit: move the workload and its equivalents to the inadmissible list."""
        key = _equivalence(record)
        items = cq.active.pop(key, [])
        cq.inadmissible.setdefault(key, []).extend(items)
        self._pending(record, assignment.reason, assignment.message)

    def _pending(self, record: WorkloadRecord, reason: str, message: str) -> None:
        if self._condition(record, "QuotaReserved", "False", reason, message):
            self._event(record, "pending", reason=reason, message=message)

    def _assign(self, cq: _ClusterQueue, record: WorkloadRecord) -> _Assignment:
        """Flavor assignment of Kueue's ``FlavorAssigner`` for the single pod set."""
        job = record.job
        val = job.total_gpus
        reasons: list[str] = []
        no_fit_reason = "WaitingForQuota"
        preempt: _Assignment | None = None
        flavors = [f for f in cq.order if cq.quotas[f].resource == job.gpu_resource]
        if not flavors:
            message = ("couldn't assign flavors to pod set main: resource "
                       f"{job.gpu_resource} unavailable in ClusterQueue")
            return _Assignment(NOFIT, reason="NoMatchingFlavor", message=message)
        for flavor in flavors:
            if job.flavor is not None and flavor != job.flavor:
                reasons.append(f"flavor {flavor} doesn't match node affinity")
                continue
            resource = cq.quotas[flavor].resource
            largest = self.nodes.largest_node(flavor)
            if largest is not None and job.gpus_per_worker > largest:
                reasons.append(f"no node of flavor {flavor} has {job.gpus_per_worker} "
                               f"{resource} for one pod (largest: {largest})")
                no_fit_reason = "ExceedsMaxQuota"
                continue
            maximum = cq.potential_available(flavor)
            if val > maximum:
                reasons.append(
                    f"insufficient quota for {resource} in flavor {flavor}, previously "
                    f"considered podsets requests (0) + current podset request ({val}) > "
                    f"maximum capacity ({maximum})"
                )
                no_fit_reason = "ExceedsMaxQuota"
                continue
            available = cq.available(flavor)
            if val <= available:
                if self.nodes.can_place(flavor, job.workers, job.gpus_per_worker):
                    borrows = cq.usage.get(flavor, 0) + val > cq.subtree.get(flavor, 0)
                    return _Assignment(FIT, flavor, borrows)
                reasons.append(f"insufficient free {resource} on the nodes of flavor {flavor} "
                               f"for {job.workers} pod(s) of {job.gpus_per_worker}")
            else:
                reasons.append(f"insufficient unused quota for {resource} in flavor {flavor}, "
                               f"{val - available} more needed")
            no_fit_reason = "WaitingForQuota"
            if preempt is None:
                targets = self._preemption_targets(cq, record, flavor)
                if targets:
                    preempt = _Assignment(PREEMPT, flavor, targets=targets)
        message = "couldn't assign flavors to pod set main: " + ", ".join(sorted(reasons))
        if preempt is not None:
            preempt.borrows = cq.usage.get(preempt.flavor, 0) + val > cq.subtree.get(
                preempt.flavor, 0)
            preempt.reason = "WaitingForPreemptedWorkloads"
            preempt.message = (f"{message}. Pending the preemption of "
                               f"{len(preempt.targets)} workload(s)")
            return preempt
        return _Assignment(NOFIT, reason=no_fit_reason, message=message)

    def _preemption_targets(
        self, cq: _ClusterQueue, record: WorkloadRecord, flavor: str
    ) -> list[tuple[WorkloadRecord, str]]:
        """Kueue's classical preemption: the smallest set found greedily, or []."""
        job, spec = record.job, cq.spec
        priority = job.priority
        same: list[WorkloadRecord] = []
        if spec.within_cluster_queue != "Never":
            newer_equal = spec.within_cluster_queue == "LowerOrNewerEqualPriority"
            for other in cq.admitted.values():
                if other.flavor != flavor:
                    continue
                p = other.job.priority
                if p < priority or (newer_equal and p == priority
                                    and (other.submitted, other.seq) > (record.submitted,
                                                                        record.seq)):
                    same.append(other)
        reclaim: list[WorkloadRecord] = []
        while_borrowing: set[str] = set()
        if cq.parent is not None and spec.reclaim_within_cohort != "Never":
            threshold = spec.borrow_within_cohort_max_priority
            for other_cq in self._tree_cqs(cq.root()):
                if other_cq is cq:
                    continue
                for other in other_cq.admitted.values():
                    if other.flavor != flavor:
                        continue
                    p = other.job.priority
                    if spec.reclaim_within_cohort == "LowerPriority" and p >= priority:
                        continue
                    reclaim.append(other)
                    if (spec.borrow_within_cohort == "LowerPriority" and p < priority
                            and (threshold is None or p <= threshold)):
                        while_borrowing.add(other.key)
        if not same and not reclaim:
            return []

        def order(other: WorkloadRecord) -> tuple:
            return (other.job.queue_name == cq.name, other.job.priority,
                    -(other.last_admitted or 0.0), other.seq)

        attempts = [(True, same + [o for o in reclaim if o.key in while_borrowing])]
        if reclaim:
            attempts.append((False, same + reclaim))
        for allow_borrowing, candidates in attempts:
            targets = self._greedy(cq, record, flavor, sorted(candidates, key=order),
                                   allow_borrowing)
            if targets:
                result = []
                for target in targets:
                    if target.job.queue_name == cq.name:
                        reason = "InClusterQueue"
                    elif allow_borrowing:
                        reason = "InCohortReclaimWhileBorrowing"
                    else:
                        reason = "InCohortReclamation"
                    result.append((target, reason))
                return result
        return []

    def _greedy(self, cq: _ClusterQueue, record: WorkloadRecord, flavor: str,
                candidates: list[WorkloadRecord], allow_borrowing: bool) -> list[WorkloadRecord]:
        job = record.job
        val = job.total_gpus
        freed: dict[str, int] = {}

        def fits() -> bool:
            if val > cq.available(flavor):
                return False
            if not allow_borrowing and cq.usage.get(flavor, 0) + val > cq.subtree.get(flavor, 0):
                return False
            return self.nodes.can_place(flavor, job.workers, job.gpus_per_worker, freed)

        def take(other: WorkloadRecord, sign: int) -> None:
            other_cq = self.cluster_queues[other.job.queue_name]
            if sign < 0:
                other_cq.remove_usage(flavor, other.job.total_gpus)
            else:
                other_cq.add_usage(flavor, other.job.total_gpus)
            for placement in other.placements:
                if placement.node is not None:
                    freed[placement.node] = freed.get(placement.node, 0) - sign * len(
                        placement.units)

        removed: list[WorkloadRecord] = []
        found = False
        for other in candidates:
            other_cq = self.cluster_queues[other.job.queue_name]
            if other_cq is not cq and other_cq.within_nominal(flavor):
                continue  # only workloads of borrowing ClusterQueues are reclaimed
            take(other, -1)
            removed.append(other)
            if fits():
                found = True
                break
        if found:
            for index in range(len(removed) - 2, -1, -1):
                take(removed[index], +1)
                if fits():
                    removed.pop(index)
                else:
                    take(removed[index], -1)
        for other in removed:
            take(other, +1)
        return removed if found else []

    def _admit(self, cq: _ClusterQueue, record: WorkloadRecord, assignment: _Assignment) -> None:
        job = record.job
        for bucket in (cq.active,):
            heap = bucket.get(_equivalence(record))
            if heap and heap[0][-1] == record.key:
                heapq.heappop(heap)
            elif heap:
                self._remove_pending(record)
        cq.add_usage(assignment.flavor, job.total_gpus)
        cq.admitted[record.key] = record
        self._start(record, assignment.flavor, job.workers)
        reserved = f"Quota reserved in ClusterQueue {cq.name}"
        self._condition(record, "QuotaReserved", "True", "QuotaReserved", reserved)
        self._condition(record, "Admitted", "True", "Admitted", "The workload is admitted")
        if "Evicted" in record.conditions:
            self._condition(record, "Evicted", "False", "QuotaReserved", reserved)
        self._event(record, "admitted", flavor=assignment.flavor,
                    reason="Admitted" if not assignment.borrows else "AdmittedBorrowing",
                    message=f"Admitted by ClusterQueue {cq.name}, wait time since "
                            f"reservation was 0s")

    def _issue_preemptions(self, cq: _ClusterQueue, record: WorkloadRecord,
                           assignment: _Assignment) -> None:
        self._pending(record, assignment.reason, assignment.message)
        uid = workload_uid(record)
        for target, reason in assignment.targets:
            target_cq = self.cluster_queues[target.job.queue_name]
            message = (f"Preempted to accommodate a workload (UID: {uid}, JobUID: "
                       f"{record.job.uid}) due to {HUMAN_PREEMPTION_REASONS[reason]}; "
                       f"preemptor path: {cq.path()}; preemptee path: {target_cq.path()}")
            self._condition(target, "Evicted", "True", "Preempted", message)
            self._condition(target, "Preempted", "True", reason, message)
            self._condition(target, "QuotaReserved", "False", "Pending", message)
            self._condition(target, "Admitted", "False", "NoReservation",
                            "The workload has no reservation")
            self._condition(target, "Requeued", "True", "Preempted", message)
            self._event(target, "preempted", flavor=target.flavor, reason=reason,
                        message=message, by=record.key)
            self._evict(target)
