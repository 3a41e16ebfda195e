"""Volcano's capacity plugin and gang scheduling, simulated.

Input: Volcano ``Queue`` manifests (``scheduling.volcano.sh/v1beta1``, as
``queues.backends.volcano.objects.queues`` renders them from the portal's specs: use
``VolcanoSimulator.from_specs``) and the ``NodePool``s of the cluster. Only GPU
resources are simulated (every resource except ``cpu``/``memory``/``pods``).

Semantics (volcano-sh/volcano ``pkg/scheduler/plugins/capacity/capacity.go``,
``plugins/gang``, ``actions/{enqueue,allocate,preempt,reclaim}``):

* ``realCapability = min(capability, total - totalGuarantee + guarantee)`` per
  resource, where ``total`` is the GPUs of all node pools and
  ``totalGuarantee`` the sum of the leaf queues' guarantees (a parent's
  guarantee covers its children and is not counted twice);
  ``deserved = max(min(deserved, realCapability), guarantee)``.
* enqueue: a PodGroup goes ``Pending -> Inqueue`` when ``minResources +
  allocated + inqueue <= realCapability`` of its queue (``jobEnqueueable``);
  otherwise it stays Pending ("queue resource quota insufficient"). Two
  simplifications: only the job's own queue is checked at enqueue (ancestors
  are checked when allocating, so a starving queue under ``deserved`` can still
  reach the reclaim action when its parent is full), and lower-priority work
  running in the same queue is not counted (so a higher-priority job reaches
  the preempt action).
* allocate: queues in order of share (``allocated / deserved``, lowest
  first), jobs by priority then age; a job starts when ``allocated + request
  <= realCapability`` up the hierarchy (``AllocatableFn``) and at least
  ``minAvailable`` of its pods fit on nodes (gang); otherwise none starts.
* preempt: a starving job may evict lower-priority jobs of its own queue.
* reclaim: a starving job whose queue stays within ``deserved`` after it starts
  (``PreemptiveFn``) may evict jobs of other queues whose ``allocated >
  deserved``, never taking a queue below its ``guarantee``; victims lowest
  priority first, newest first. Whole gangs are evicted (a gang with
  ``minAvailable`` = all workers cannot run short) and restart later.
* PodGroup conditions: ``Scheduled`` ("tasks in gang are ready to be
  scheduled") or ``Unschedulable`` with reason ``NotEnoughResources`` and the
  gang plugin's message ("2/2 tasks in gang unschedulable: pod group is not
  ready, 2 Pending, 2 minAvailable; Pending: 2 Unschedulable").
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from queues import quantity
from queues.backends.volcano import objects as render_volcano
from queues.schedmodel.core import SimulatorBase, WorkloadRecord
from queues.schedmodel.model import NodePool
from queues.specs import CohortSpec, FlavorSpec, SpecError, TeamQueueSpec

__all__ = ["VolcanoQueue", "VolcanoSimulator"]

_NOT_GPU = ("cpu", "memory", "pods", "ephemeral-storage")
_FINISHED_PHASE = {"Succeeded": "Completed", "Failed": "Failed"}


def _gpu_amounts(values: Mapping[str, Any] | None, field_name: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for resource, raw in (values or {}).items():
        if resource in _NOT_GPU:
            continue
        try:
            amount = quantity.parse(str(raw))
        except ValueError as exc:
            raise SpecError(f"{field_name}.{resource}", str(exc)) from None
        if amount != amount.to_integral_value() or amount < 0:
            raise SpecError(f"{field_name}.{resource}", f"must be a whole count, got {raw!r}")
        out[resource] = int(amount)
    return out


@dataclass
class VolcanoQueue:
    """A Volcano Queue of the capacity plugin (GPU resources only, in units).

    ``capability``: ``None`` = unset (no cap but the cluster); ``guarantee``:
    never reclaimed below. ``parent``: the parent Queue name (``None`` = root).
    """

    name: str
    deserved: dict[str, int] = field(default_factory=dict)
    capability: dict[str, int] | None = None
    guarantee: dict[str, int] = field(default_factory=dict)
    parent: str | None = None
    reclaimable: bool = True
    children: list[str] = field(default_factory=list)
    allocated: dict[str, int] = field(default_factory=dict)
    inqueue: dict[str, int] = field(default_factory=dict)
    real_capability: dict[str, int] = field(default_factory=dict)
    deserved_eff: dict[str, int] = field(default_factory=dict)

    @classmethod
    def from_manifest(cls, manifest: Mapping[str, Any]) -> VolcanoQueue:
        """Read a ``Queue`` object. Raises ``SpecError`` naming the bad field."""
        name = manifest.get("metadata", {}).get("name")
        if not isinstance(name, str) or not name:
            raise SpecError("metadata.name", "a Queue needs a name")
        spec = manifest.get("spec", {})
        capability = spec.get("capability")
        return cls(
            name=name,
            deserved=_gpu_amounts(spec.get("deserved"), "spec.deserved"),
            capability=None if capability is None else _gpu_amounts(capability,
                                                                    "spec.capability"),
            guarantee=_gpu_amounts(spec.get("guarantee", {}).get("resource"),
                                   "spec.guarantee.resource"),
            parent=spec.get("parent"),
            reclaimable=bool(spec.get("reclaimable", True)),
        )


class VolcanoSimulator(SimulatorBase):
    """Volcano capacity-plugin semantics (see the module doc).

    ``queues``: ``VolcanoQueue``s or Queue manifests; jobs go to leaf queues
    (the teams). ``node_pools``: the cluster's nodes (Volcano places pods, so a
    pool is needed for every GPU resource jobs ask for). Raises ``SpecError``
    for a duplicated queue, an unknown parent or a queue cycle.
    """

    def __init__(self, queues: Iterable[VolcanoQueue | Mapping[str, Any]],
                 node_pools: Iterable[NodePool], *, requeue_delay: float = 1.0) -> None:
        super().__init__(node_pools, requeue_delay=requeue_delay)
        self.queues: dict[str, VolcanoQueue] = {}
        for index, item in enumerate(queues):
            queue = item if isinstance(item, VolcanoQueue) else VolcanoQueue.from_manifest(item)
            if queue.name in self.queues:
                raise SpecError(f"queues[{index}].metadata.name", f"{queue.name!r} listed twice")
            self.queues[queue.name] = queue
        for queue in self.queues.values():
            if queue.parent is not None and queue.parent != "root":
                if queue.parent not in self.queues:
                    raise SpecError("spec.parent", f"queue {queue.name!r}: no parent "
                                                   f"{queue.parent!r}")
                self.queues[queue.parent].children.append(queue.name)
        for queue in self.queues.values():
            seen, current = {queue.name}, queue.parent
            while current not in (None, "root"):
                if current in seen:
                    raise SpecError("spec.parent", f"queue cycle through {current!r}")
                seen.add(current)
                current = self.queues[current].parent
        self._known_queues = {name for name, q in self.queues.items() if not q.children}
        total: dict[str, int] = {}
        for pool in self.nodes.pools.values():
            total[pool.gpu_resource] = total.get(pool.gpu_resource, 0) + pool.total_units
        total_guarantee: dict[str, int] = {}
        for name in self._known_queues:
            for resource, amount in self.queues[name].guarantee.items():
                total_guarantee[resource] = total_guarantee.get(resource, 0) + amount
        for queue in self.queues.values():
            for resource in set(total) | set(queue.deserved):
                real = total.get(resource, 0) - total_guarantee.get(resource, 0) + \
                    queue.guarantee.get(resource, 0)
                if queue.capability is not None and resource in queue.capability:
                    real = min(real, queue.capability[resource])
                queue.real_capability[resource] = real
                queue.deserved_eff[resource] = max(
                    min(queue.deserved.get(resource, 0), real), queue.guarantee.get(resource, 0))
        self._pending: list[WorkloadRecord] = []
        self._inqueue: list[WorkloadRecord] = []
        self._pods: dict[str, int] = {}

    @classmethod
    def from_specs(cls, *, flavors: Iterable[FlavorSpec], teams: Iterable[TeamQueueSpec],
                   cohorts: Iterable[CohortSpec] = (),
                   node_pools: Iterable[NodePool],
                   requeue_delay: float = 1.0) -> VolcanoSimulator:
        """Queues rendered from the portal's specs by ``queues.backends.volcano.objects.queues``
        (deserved = nominal, capability = nominal + borrowing limit, guarantee =
        nominal - lending limit), on ``node_pools``."""
        manifests = render_volcano.queues(flavors=flavors, cohorts=cohorts, teams=teams)
        return cls(manifests, node_pools, requeue_delay=requeue_delay)

    # ----------------------------------------------------------- public reads

    def podgroup_status(self, key: str) -> dict:
        """The PodGroup status in Volcano's shape: ``{"phase", "running",
        "minMember", "conditions": [...]}``; phases Pending, Inqueue, Running,
        Completed (the job's outcome decides Completed or Failed)."""
        record = self.workloads[key]
        phase = {"Admitted": "Running"}.get(record.state, record.state)
        if record.state == "Pending" and record in self._inqueue:
            phase = "Inqueue"
        if record.state == "Finished":
            phase = _FINISHED_PHASE[record.outcome]
        return {
            "phase": phase,
            "running": len(record.placements),
            "minMember": record.job.gang_size,
            "conditions": list(record.conditions.values()),
        }

    def share(self, queue: str) -> float:
        """``max over resources of allocated / deserved`` (0..inf), the capacity
        plugin's queue order key."""
        q = self.queues[queue]
        share = 0.0
        for resource, deserved in q.deserved_eff.items():
            used = q.allocated.get(resource, 0)
            if deserved > 0:
                share = max(share, used / deserved)
            elif used > 0:
                share = max(share, 1.0)
        return share

    # ----------------------------------------------------------- base hooks

    def _chain(self, queue: str) -> list[VolcanoQueue]:
        out, current = [], queue
        while current not in (None, "root"):
            out.append(self.queues[current])
            current = self.queues[current].parent
        return out

    def _usage_of(self, queue: str) -> dict[str, tuple[int, int]]:
        q = self.queues[queue]
        return {
            resource: (q.allocated.get(resource, 0),
                       max(0, q.allocated.get(resource, 0) - q.deserved_eff.get(resource, 0)))
            for resource in sorted(set(q.deserved_eff) | set(q.allocated))
        }

    def _enqueue(self, record: WorkloadRecord) -> None:
        self._pending.append(record)

    def _remove_pending(self, record: WorkloadRecord) -> None:
        if record in self._pending:
            self._pending.remove(record)
        if record in self._inqueue:
            self._inqueue.remove(record)
            self._add(record.job.queue_name, "inqueue", record.job.gpu_resource,
                      -record.job.gang_size * record.job.gpus_per_worker)

    def _release(self, record: WorkloadRecord) -> None:
        used = self._pods.pop(record.key) * record.job.gpus_per_worker
        self._add(record.job.queue_name, "allocated", record.job.gpu_resource, -used)

    def _on_finished(self, record: WorkloadRecord) -> None:
        phase = _FINISHED_PHASE[record.job.outcome]
        self._event(record, "finished", flavor=record.flavor, reason=phase,
                    message=f"job {phase.lower()}")

    def _add(self, queue: str, what: str, resource: str, amount: int) -> None:
        for q in self._chain(queue):
            bucket = getattr(q, what)
            bucket[resource] = bucket.get(resource, 0) + amount
        self._dirty_queues.add(queue)

    # ------------------------------------------------------------ scheduling

    @staticmethod
    def _order(record: WorkloadRecord) -> tuple:
        return (-record.job.priority, record.submitted, record.seq)

    def _fits_capability(self, queue: str, resource: str, amount: int, *extra: str) -> bool:
        for q in self._chain(queue):
            used = amount + sum(getattr(q, name).get(resource, 0) for name in extra)
            if used > q.real_capability.get(resource, 0):
                return False
        return True

    def _pools_for(self, record: WorkloadRecord) -> list[str]:
        job = record.job
        return [name for name, pool in sorted(self.nodes.pools.items())
                if pool.gpu_resource == job.gpu_resource
                and (job.flavor is None or name == job.flavor)]

    def _placeable(self, record: WorkloadRecord, freed: dict[str, int] | None = None
                   ) -> tuple[str, int] | None:
        """(pool, pods) for the most pods in [minAvailable, workers] that fit."""
        job = record.job
        for flavor in self._pools_for(record):
            for pods in range(job.workers, job.gang_size - 1, -1):
                if self.nodes.can_place(flavor, pods, job.gpus_per_worker, freed):
                    return flavor, pods
        return None

    def _unschedulable(self, record: WorkloadRecord, origin: str) -> None:
        job = record.job
        message = (f"{job.gang_size}/{job.workers} tasks in gang unschedulable: pod group is "
                   f"not ready, {job.workers} Pending, {job.gang_size} minAvailable; Pending: "
                   f"{job.workers} Unschedulable. Origin reason is: {origin}")
        changed = self._condition(record, "Unschedulable", "True", "NotEnoughResources", message)
        record.conditions.pop("Scheduled", None)
        if changed:
            self._event(record, "pending", reason="NotEnoughResources", message=message)

    def _nodes_message(self, record: WorkloadRecord) -> str:
        job = record.job
        pools = self._pools_for(record)
        nodes = sum(self.nodes.pools[p].nodes for p in pools)
        return f"0/{nodes} nodes are unavailable: {nodes} Insufficient {job.gpu_resource}."

    def _schedule(self) -> None:
        # enqueue
        for record in sorted(self._pending, key=self._order):
            job = record.job
            need = job.gang_size * job.gpus_per_worker
            if self._enqueueable(record, need):
                self._pending.remove(record)
                self._inqueue.append(record)
                self._add(job.queue_name, "inqueue", job.gpu_resource, need)
                self._event(record, "inqueue", reason="Inqueue")
            else:
                self._unschedulable(record, "queue resource quota insufficient: insufficient "
                                            f"{job.gpu_resource}")
        # allocate: queue with the lowest share first, one job at a time
        waiting: dict[str, list[WorkloadRecord]] = {}
        for record in sorted(self._inqueue, key=self._order):
            waiting.setdefault(record.job.queue_name, []).append(record)
        starving: list[WorkloadRecord] = []
        while waiting:
            queue = min(waiting, key=lambda name: (self.share(name), name))
            record = waiting[queue].pop(0)
            if not waiting[queue]:
                del waiting[queue]
            if not self._try_allocate(record):
                starving.append(record)
        # preempt within the queue, then reclaim across queues
        for record in sorted(starving, key=self._order):
            if record.state == "Pending" and record in self._inqueue:
                self._evict_for(record, within_queue=True) or self._evict_for(
                    record, within_queue=False)

    def _enqueueable(self, record: WorkloadRecord, need: int) -> bool:
        """``jobEnqueueable`` on the job's own queue: ``minResources + allocated +
        inqueue <= realCapability``, where lower-priority work running in the same
        queue does not count (the preempt action can take it back)."""
        job = record.job
        queue = self.queues[job.queue_name]
        preemptible = sum(
            self._pods[other.key] * other.job.gpus_per_worker for other in self.running()
            if other.job.queue_name == job.queue_name and other.job.priority < job.priority
            and other.job.gpu_resource == job.gpu_resource)
        used = (queue.allocated.get(job.gpu_resource, 0) - preemptible
                + queue.inqueue.get(job.gpu_resource, 0) + need)
        return used <= queue.real_capability.get(job.gpu_resource, 0)

    def _try_allocate(self, record: WorkloadRecord) -> bool:
        job = record.job
        place = self._placeable(record)
        if place is None:
            self._unschedulable(record, self._nodes_message(record))
            return False
        flavor, pods = place
        if not self._fits_capability(job.queue_name, job.gpu_resource,
                                     job.gang_size * job.gpus_per_worker, "allocated"):
            self._unschedulable(record, "queue resource quota insufficient: insufficient "
                                        f"{job.gpu_resource}")
            return False
        while pods > job.gang_size and not self._fits_capability(
                job.queue_name, job.gpu_resource, pods * job.gpus_per_worker, "allocated"):
            pods -= 1
        self._allocate(record, flavor, pods)
        return True

    def _allocate(self, record: WorkloadRecord, flavor: str, pods: int) -> None:
        job = record.job
        self._inqueue.remove(record)
        self._add(job.queue_name, "inqueue", job.gpu_resource, -job.gang_size * job.gpus_per_worker)
        self._add(job.queue_name, "allocated", job.gpu_resource, pods * job.gpus_per_worker)
        self._pods[record.key] = pods
        self._start(record, flavor, pods)
        record.conditions.pop("Unschedulable", None)
        self._condition(record, "Scheduled", "True", "tasks in gang are ready to be scheduled", "")
        self._event(record, "admitted", flavor=flavor, reason="Scheduled",
                    message=f"{pods}/{job.workers} pods running on {flavor}")

    def _pod_names(self, record: WorkloadRecord, pods: int) -> list[str]:
        return [f"{record.job.name}-worker-{i}" for i in range(pods)]

    def _evict_for(self, record: WorkloadRecord, *, within_queue: bool) -> bool:
        """Preempt (own queue, lower priority) or reclaim (other queues above deserved)
        whole jobs until ``record`` fits; evict nothing if it cannot."""
        job = record.job
        resource, queue = job.gpu_resource, job.queue_name
        need = job.gang_size * job.gpus_per_worker
        own = self.queues[queue]
        if not within_queue:
            future = own.allocated.get(resource, 0) + need
            if future > own.deserved_eff.get(resource, 0) or future > own.real_capability.get(
                    resource, 0):
                return False  # PreemptiveFn: the queue would go above deserved
        candidates = []
        for other in self.running():
            if other.job.gpu_resource != resource:
                continue
            if within_queue:
                if other.job.queue_name == queue and other.job.priority < job.priority:
                    candidates.append(other)
            elif other.job.queue_name != queue and self.queues[other.job.queue_name].reclaimable:
                candidates.append(other)
        candidates.sort(key=lambda r: (r.job.priority, -(r.last_admitted or 0.0), -r.seq))
        allocated = {name: dict(q.allocated) for name, q in self.queues.items()}
        freed: dict[str, int] = {}
        victims: list[WorkloadRecord] = []

        def fits() -> bool:
            for q in self._chain(queue):
                used = allocated[q.name].get(resource, 0) + need
                if used > q.real_capability.get(resource, 0):
                    return False
            return self._placeable(record, freed) is not None

        for other in candidates:
            if fits():
                break
            units = self._pods[other.key] * other.job.gpus_per_worker
            if not within_queue:
                victim_queue = self.queues[other.job.queue_name]
                mine = allocated[victim_queue.name].get(resource, 0)
                if mine <= victim_queue.deserved_eff.get(resource, 0):
                    continue  # not above deserved: not reclaimable
                if mine - units < victim_queue.guarantee.get(resource, 0):
                    continue  # would break the queue's guarantee
            for q in self._chain(other.job.queue_name):
                allocated[q.name][resource] = allocated[q.name].get(resource, 0) - units
            for placement in other.placements:
                if placement.node is not None:
                    freed[placement.node] = freed.get(placement.node, 0) + len(placement.units)
            victims.append(other)
        if not victims or not fits():
            return False
        action = "preempt" if within_queue else "reclaim"
        for victim in victims:
            self._condition(victim, "Scheduled", "False", "Evict", action)
            self._event(victim, "preempted", flavor=victim.flavor, reason="Evict",
                        message=action, by=record.key)
            self._evict(victim)
        place = self._placeable(record)
        if place is None or not self._fits_capability(queue, resource, need, "allocated"):
            return False
        flavor, pods = place
        while pods > job.gang_size and not self._fits_capability(
                queue, resource, pods * job.gpus_per_worker, "allocated"):
            pods -= 1
        self._allocate(record, flavor, pods)
        return True
