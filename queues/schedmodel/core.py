"""The discrete-event core shared by the Kueue and Volcano simulators.

A simulator holds a heap of timed events (job arrivals, job completions) and a
simulated clock ``now`` (seconds). ``advance(t)`` processes every event up to
``t`` in time order; after each instant it runs the scheduler's admission pass
once (``_schedule``), so many events at one instant are seen together, as a
scheduling cycle would. ``run()`` advances until nothing is left. The clock only
moves through ``advance``: a batch run jumps from event to event (much faster
than real time) and a live driver calls ``advance(elapsed * speed)`` on a timer.

Everything is deterministic: ties are broken by submission order, pod names and
UIDs are derived from job names, and no wall clock or unseeded randomness is
read. Same jobs in, same events out.
"""

from __future__ import annotations

import hashlib
import heapq
import itertools
from abc import ABC, abstractmethod
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from queues.specs import SpecError

from .model import NodePool, PodPlacement, SimEvent, SimJob, UsageSample

__all__ = ["NodeInventory", "SimResult", "SimulatorBase", "WorkloadRecord", "pod_suffix"]

# Alphabet Kubernetes uses for generated name suffixes (apimachinery util/rand).
_SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"

_FINISH, _ARRIVE = 0, 1  # at one instant, completions free capacity before arrivals


def pod_suffix(*parts: object) -> str:
    """A deterministic 5-character pod-name suffix in Kubernetes' alphabet."""
    digest = hashlib.blake2b("/".join(map(str, parts)).encode(), digest_size=8).digest()
    return "".join(_SUFFIX_ALPHABET[b % len(_SUFFIX_ALPHABET)] for b in digest[:5])


class NodeInventory:
    """Free units per node, per flavor; first-fit placement of equal-sized pods.

    Flavors without a ``NodePool`` are *quota-only*: ``can_place`` is always
    true and pods get no node. Raises ``SpecError("node_pools[i].flavor")`` when
    a flavor has two pools.
    """

    def __init__(self, pools: Iterable[NodePool] = ()) -> None:
        self.pools: dict[str, NodePool] = {}
        self._free: dict[str, list[list[int]]] = {}
        for index, pool in enumerate(pools):
            if pool.flavor in self.pools:
                raise SpecError(f"node_pools[{index}].flavor", f"{pool.flavor!r} listed twice")
            self.pools[pool.flavor] = pool
            self._free[pool.flavor] = [list(range(pool.units_per_node)) for _ in range(pool.nodes)]

    def has_pool(self, flavor: str) -> bool:
        return flavor in self.pools

    def largest_node(self, flavor: str) -> int | None:
        """Units per node of the flavor's pool, ``None`` for a quota-only flavor."""
        pool = self.pools.get(flavor)
        return pool.units_per_node if pool else None

    def free_per_node(self, flavor: str) -> list[int]:
        """Free units on each node of the flavor, in node order."""
        return [len(free) for free in self._free.get(flavor, ())]

    def can_place(
        self, flavor: str, pods: int, units: int, freed: dict[str, int] | None = None
    ) -> bool:
        """Whether ``pods`` pods of ``units`` each fit on the flavor's nodes, counting
        ``freed`` (node name -> units) as free too (what a preemption would release)."""
        pool = self.pools.get(flavor)
        if pool is None:
            return True
        if units > pool.units_per_node:
            return False
        fit = 0
        for index, free in enumerate(self._free[flavor]):
            extra = freed.get(pool.node_name(index), 0) if freed else 0
            fit += (len(free) + extra) // units
            if fit >= pods:
                return True
        return False

    def place(self, flavor: str, pod_names: list[str], units: int) -> tuple[PodPlacement, ...]:
        """Put each pod on the first node with room (lowest unit indices first).
        Call only after ``can_place``; raises ``RuntimeError`` if they do not fit."""
        pool = self.pools.get(flavor)
        if pool is None:
            return tuple(PodPlacement(name, None, ()) for name in pod_names)
        placements = []
        nodes = self._free[flavor]
        index = 0
        for name in pod_names:
            while index < len(nodes) and len(nodes[index]) < units:
                index += 1
            if index == len(nodes):
                self.release(flavor, placements)
                raise RuntimeError(f"pods do not fit on flavor {flavor}")
            taken, nodes[index][:] = nodes[index][:units], nodes[index][units:]
            placements.append(PodPlacement(name, pool.node_name(index), tuple(taken)))
        return tuple(placements)

    def release(self, flavor: str, placements: Iterable[PodPlacement]) -> None:
        """Give the pods' units back to their nodes."""
        pool = self.pools.get(flavor)
        if pool is None:
            return
        prefix = f"{pool.node_prefix or pool.flavor}-"
        for placement in placements:
            if placement.node is None:
                continue
            free = self._free[flavor][int(placement.node.removeprefix(prefix))]
            free.extend(placement.units)
            free.sort()


@dataclass(eq=False)
class WorkloadRecord:
    """The simulator's state of one job.

    * ``state``: ``"Pending"``, ``"Admitted"`` (running), ``"Finished"`` or
      ``"Cancelled"``; ``outcome`` once finished.
    * times in simulated seconds: ``submitted``, ``first_admitted``,
      ``last_admitted`` (the admission that ran to the end), ``finished``.
    * ``flavor``: the flavor admitted to (last admission); ``placements``: its pods.
    * ``evictions``: how often it was preempted.
    * ``conditions``: condition type -> ``{"type", "status", "reason", "message",
      "lastTransitionTime"}`` (seconds), in the scheduler's vocabulary (Kueue
      Workload conditions or Volcano PodGroup conditions).
    """

    job: SimJob
    seq: int
    state: str = "Pending"
    flavor: str | None = None
    submitted: float = 0.0
    first_admitted: float | None = None
    last_admitted: float | None = None
    finished: float | None = None
    outcome: str | None = None
    evictions: int = 0
    run: int = 0
    placements: tuple[PodPlacement, ...] = ()
    conditions: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return self.job.key

    @property
    def wait(self) -> float | None:
        """Seconds from submission to the admission that ran to completion."""
        return None if self.last_admitted is None else self.last_admitted - self.submitted


@dataclass(frozen=True)
class SimResult:
    """What a run produced: ``events`` and ``usage`` in time order, ``workloads``
    by key, and ``end`` (the clock when the run stopped, seconds)."""

    events: tuple[SimEvent, ...]
    usage: tuple[UsageSample, ...]
    workloads: dict[str, WorkloadRecord]
    end: float

    def admissions(self) -> list[tuple[float, str, str | None]]:
        """``(time, workload, flavor)`` of every admission, in order."""
        return [(e.time, e.workload, e.flavor) for e in self.events if e.kind == "admitted"]

    def fingerprint(self) -> str:
        """A hash of every event and usage sample, to compare two runs."""
        digest = hashlib.sha256()
        for item in (*self.events, *self.usage):
            digest.update(repr(item).encode())
        return digest.hexdigest()


class SimulatorBase(ABC):
    """Clock, event heap, workload records, events and usage for a scheduler model.

    Abstract: :class:`~queues.backends.kueue.model.KueueSimulator` and
    :class:`~queues.backends.volcano.model.VolcanoSimulator` implement the five
    scheduler-specific hooks below (instantiating this class raises ``TypeError``).
    """

    def __init__(self, node_pools: Iterable[NodePool] = (), *, requeue_delay: float = 1.0) -> None:
        if isinstance(requeue_delay, bool) or not isinstance(requeue_delay, int | float) or not (
                requeue_delay > 0):
            raise SpecError("requeue_delay", f"must be > 0 seconds, got {requeue_delay!r}")
        self.requeue_delay = float(requeue_delay)
        self.now = 0.0
        self.nodes = NodeInventory(node_pools)
        self.workloads: dict[str, WorkloadRecord] = {}
        self._running: dict[str, WorkloadRecord] = {}  # index of state == "Admitted"
        self.events: list[SimEvent] = []
        self.usage: list[UsageSample] = []
        self._heap: list[tuple[float, int, int, str, int]] = []
        self._seq = itertools.count()
        self._dirty_queues: set[str] = set()
        self._last_usage: dict[tuple[str, str], tuple[int, int]] = {}
        self._known_queues: set[str] = set()

    # ----------------------------------------------------------------- driving

    def submit(self, job: SimJob) -> WorkloadRecord:
        """Queue ``job`` for arrival at ``max(job.submit_time, now)``.

        Raises ``SpecError("name")`` for a key already submitted and
        ``SpecError("queue")`` for a queue the simulator does not know.
        """
        if job.key in self.workloads:
            raise SpecError("name", f"job {job.key} was already submitted")
        if job.queue_name not in self._known_queues:
            raise SpecError("queue", f"no queue {job.queue_name!r} in the simulated cluster")
        seq = next(self._seq)
        arrival = max(job.submit_time, self.now)
        record = WorkloadRecord(job=job, seq=seq, submitted=arrival)
        self.workloads[job.key] = record
        heapq.heappush(self._heap, (arrival, _ARRIVE, seq, job.key, 0))
        return record

    def submit_all(self, jobs: Iterable[SimJob]) -> None:
        """``submit`` each job."""
        for job in jobs:
            self.submit(job)

    def cancel(self, key: str) -> None:
        """Remove a job now: a pending one leaves its queue, a running one stops and
        frees its GPUs. Raises ``KeyError`` for an unknown key; no-op when done."""
        record = self.workloads[key]
        if record.state == "Pending":
            if record.submitted <= self.now:
                self._remove_pending(record)
        elif record.state == "Admitted":
            self._stop(record)
        else:
            return
        record.state = "Cancelled"
        record.run += 1  # drops a pending arrival or finish from the heap
        self._event(record, "cancelled")
        self._schedule()
        self._record_usage()

    def next_event_time(self) -> float | None:
        """Time of the next arrival or completion, ``None`` when idle."""
        return self._heap[0][0] if self._heap else None

    def advance(self, until: float) -> list[SimEvent]:
        """Process everything up to ``until`` (seconds, >= now); the clock ends at
        ``until``. Returns the events that happened. Raises ``ValueError`` when
        ``until`` is before ``now``."""
        if until < self.now:
            raise ValueError(f"cannot go back in time: now={self.now}, until={until}")
        start = len(self.events)
        while self._heap and self._heap[0][0] <= until:
            instant = self._heap[0][0]
            self.now = instant
            while self._heap and self._heap[0][0] == instant:
                _, kind, _, key, run = heapq.heappop(self._heap)
                record = self.workloads[key]
                if kind == _ARRIVE:
                    if record.state == "Pending" and record.run == run:
                        self._event(record, "queued", reason="Requeued" if run else "")
                        self._enqueue(record)
                elif record.state == "Admitted" and record.run == run:
                    self._finish(record)
            self._schedule()
            self._record_usage()
        self.now = until
        return self.events[start:]

    def run(self, until: float | None = None) -> SimResult:
        """Advance until the heap is empty (or ``until``) and return the result."""
        if until is None:
            while self._heap:
                self.advance(self._heap[0][0])
        else:
            self.advance(until)
        return self.result()

    def result(self) -> SimResult:
        """A snapshot of events, usage and workload records so far."""
        return SimResult(tuple(self.events), tuple(self.usage), dict(self.workloads), self.now)

    def running(self) -> list[WorkloadRecord]:
        """Admitted (running) workloads, in admission order."""
        return sorted(self._running.values(), key=lambda r: (r.last_admitted, r.seq))

    # --------------------------------------------------------- for subclasses

    @abstractmethod
    def _enqueue(self, record: WorkloadRecord) -> None:
        """A job arrives (or is requeued): put ``record`` in its queue's pending set."""

    @abstractmethod
    def _remove_pending(self, record: WorkloadRecord) -> None:
        """Take ``record`` out of the pending set (cancelled before admission)."""

    @abstractmethod
    def _release(self, record: WorkloadRecord) -> None:
        """A running job stops (finished, preempted, cancelled): free its quota."""

    @abstractmethod
    def _schedule(self) -> None:
        """One admission pass at ``self.now`` (admit, preempt, set pending reasons)."""

    @abstractmethod
    def _usage_of(self, queue: str) -> dict[str, tuple[int, int]]:
        """Current usage of ``queue``: ``{flavor: (units in use, units borrowed)}``."""

    def _pod_names(self, record: WorkloadRecord, pods: int) -> list[str]:
        job = record.job
        return [f"{job.name}-{i}-{pod_suffix(job.uid, record.run, i)}" for i in range(pods)]

    def _start(self, record: WorkloadRecord, flavor: str, pods: int) -> None:
        """Mark admitted on ``flavor``: place pods, schedule the completion."""
        job = record.job
        record.run += 1
        record.state = "Admitted"
        self._running[job.key] = record
        record.flavor = flavor
        record.placements = self.nodes.place(
            flavor, self._pod_names(record, pods), job.gpus_per_worker
        )
        if record.first_admitted is None:
            record.first_admitted = self.now
        record.last_admitted = self.now
        heapq.heappush(
            self._heap, (self.now + job.duration, _FINISH, next(self._seq), job.key, record.run)
        )
        self._dirty_queues.add(job.queue_name)

    def _stop(self, record: WorkloadRecord) -> None:
        """Take a running workload off its nodes and out of its queue's usage."""
        self._release(record)
        self._running.pop(record.key, None)
        self.nodes.release(record.flavor, record.placements)
        record.placements = ()
        self._dirty_queues.add(record.job.queue_name)

    def _evict(self, record: WorkloadRecord) -> None:
        """Stop a running workload; it is back in its queue ``requeue_delay`` seconds
        later (pods terminating, the job suspended and its workload requeued) and
        restarts from zero when admitted again. The delay also stops two queues
        from trading the same GPUs back and forth within one instant."""
        self._stop(record)
        record.state = "Pending"
        record.run += 1
        record.evictions += 1
        heapq.heappush(self._heap, (self.now + self.requeue_delay, _ARRIVE, next(self._seq),
                                    record.key, record.run))

    def _finish(self, record: WorkloadRecord) -> None:
        job = record.job
        self._stop(record)
        record.state = "Finished"
        record.outcome = job.outcome
        record.finished = self.now
        self._on_finished(record)

    def _on_finished(self, record: WorkloadRecord) -> None:
        self._event(record, "finished", flavor=record.flavor, reason=record.job.outcome)

    def _event(self, record: WorkloadRecord, kind: str, **fields: Any) -> None:
        self.events.append(
            SimEvent(self.now, record.key, record.job.queue_name, kind, **fields)
        )

    def _condition(
        self, record: WorkloadRecord, ctype: str, status: str, reason: str, message: str
    ) -> bool:
        """Set a condition; ``lastTransitionTime`` moves only when the status changes.
        Returns whether anything changed."""
        old = record.conditions.get(ctype)
        if old and (old["status"], old["reason"], old["message"]) == (status, reason, message):
            return False
        since = old["lastTransitionTime"] if old and old["status"] == status else self.now
        record.conditions[ctype] = {
            "type": ctype,
            "status": status,
            "reason": reason,
            "message": message,
            "lastTransitionTime": since,
        }
        return True

    def _record_usage(self) -> None:
        for queue in sorted(self._dirty_queues):
            for flavor, (units, borrowed) in sorted(self._usage_of(queue).items()):
                if self._last_usage.get((queue, flavor), (0, 0)) != (units, borrowed):
                    self._last_usage[(queue, flavor)] = (units, borrowed)
                    self.usage.append(UsageSample(self.now, queue, flavor, units, borrowed))
        self._dirty_queues.clear()
