"""The simulated scheduler's controllers: Kueue (or Volcano) acting on a cluster over HTTP.

No Django. A :class:`SimController` plays the part of Kueue's (or Volcano's)
controllers against any cluster reached through
:class:`queues.cluster.KubernetesCluster` (the official client over real HTTP;
in the demo and the tests, our API emulator). Each :meth:`SimController.step`
is one poll (the emulator has no watch):

Kueue (``backend="kueue"``)
  1. reads ClusterQueues, Cohorts, ResourceFlavors and LocalQueues and builds
     the quota tree of a :class:`queues.schedmodel.KueueSimulator`; when any
     of their specs change the simulator is rebuilt (running jobs keep running
     with their remaining time, pending ones keep their order);
  2. lists suspended batch/v1 Jobs and JobSets carrying
     ``kueue.x-k8s.io/queue-name``, creates each one's ``Workload``
     (:func:`harness.sim.kueue_objects.create_workload`, priority from its
     WorkloadPriorityClass) and submits it to the simulator;
  3. honours ``Workload.spec.active: false`` (deactivation: evicted with
     reason ``Deactivated``, quota released, the job suspended) and deleted jobs
     (the Workload is deleted, as the garbage collector would);
  4. advances the simulator to the clock and writes back what happened in
     Kueue's words: ``QuotaReserved=False`` with ``WaitingForQuota`` /
     ``ExceedsMaxQuota`` messages, admission (``status.admission``,
     ``QuotaReserved``/``Admitted``, events ``QuotaReserved``/``Admitted``), the
     job unsuspended with the flavor's node labels, ``PodsReady``, preemption
     (``Evicted``/``Preempted`` with the preemptor's UIDs, the job suspended
     again), and ``Finished`` with the job's ``Complete``/``Failed`` status;
  5. writes each ClusterQueue's status (``Active`` condition, ``flavorsUsage``,
     ``flavorsReservation``, workload counts) when it changed.

Volcano (``backend="volcano"``)
  reads the ``Queue`` objects into a
  :class:`queues.schedmodel.VolcanoSimulator` (opens queues without a state),
  creates each vcjob's PodGroup, consumes ``Command`` objects (AbortJob,
  TerminateJob), and writes PodGroup phases/conditions (``Inqueue``,
  ``Unschedulable``/``NotEnoughResources``, ``Running``) and the vcjob's
  ``status.state`` (Pending, Running, Restarting after an eviction, Completed,
  Failed).

Jobs declare how they behave through annotations
(:data:`harness.sim.annotations.SIM_DURATION_ANNOTATION` etc.): running time in seconds
(default: ``activeDeadlineSeconds`` if set, else ``default_duration``; a
declared duration longer than ``activeDeadlineSeconds`` fails at the deadline
with ``DeadlineExceeded``), outcome (``Succeeded``/``Failed``) and activity
profile (``training``, ``notebook``, ``inference``) for the simulated DCGM
exporter (:meth:`SimController.metrics_text`).

Time: :class:`SimClock` runs ``speed`` simulated seconds per wall second
(``SIM_SPEED``); durations are simulated seconds, timestamps written to objects
are wall-clock UTC. Node pools (the GPUs the simulator places pods on and the
exporter reports) are given (``node_pools`` + ``flavor_labels``, see
:func:`pools_from_json`) or, on Kueue, derived from the ResourceFlavors: 8
units per node (56 MIG instances for a ``nvidia.com/mig-*`` resource) and
enough nodes for every nominal quota of the flavor.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import logging
import math
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from queues import quantity
from queues.backends.kueue.jobs import JOB_API_VERSION as BATCH_API_VERSION
from queues.backends.kueue.jobs import JOBSET_API_VERSION, PRIORITY_CLASS_LABEL, QUEUE_NAME_LABEL
from queues.backends.kueue.model import KueueSimulator
from queues.backends.volcano.jobs import (
    COMMAND_API_VERSION,
    PODGROUP_API_VERSION,
    QUEUE_API_VERSION,
    podgroup_name,
)
from queues.backends.volcano.jobs import (
    JOB_API_VERSION as VCJOB_API_VERSION,
)
from queues.backends.volcano.model import VolcanoSimulator
from queues.errors import ClusterError
from queues.schedmodel import OUTCOMES, PROFILES, NodePool, SimEvent, SimJob, SimulatorBase
from queues.specs import CohortSpec, FlavorQuota, SpecError, TeamQueueSpec

from . import kueue_objects as ko
from . import volcano_objects as vo
from .annotations import SIM_DURATION_ANNOTATION, SIM_OUTCOME_ANNOTATION, SIM_PROFILE_ANNOTATION
from .dcgm import gpu_units, render_metrics

__all__ = ["BACKENDS", "SimClock", "SimController", "derive_kueue_pools", "pools_from_json"]

log = logging.getLogger(__name__)

#: The simulated controllers, by backend name: the method that plays one poll of it.
_STEPS = {"kueue": "_step_kueue", "volcano": "_step_volcano"}
BACKENDS = tuple(_STEPS)
#: Backends whose node pools cannot be derived from the objects (ResourceFlavors).
_POOLS_REQUIRED = frozenset({"volcano"})
KUEUE = "kueue.x-k8s.io/v1beta2"
_NOT_GPU = ("cpu", "memory", "pods", "ephemeral-storage")
_GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"
_MIG_PREFIX = "nvidia.com/mig-"
_MIG_INSTANCES = {"1g": 7, "2g": 3, "3g": 2, "4g": 1, "7g": 1}
_JOB_DONE = ("Complete", "Failed")
_JOBSET_DONE = ("Completed", "Failed")
_VC_FINAL = ("Completed", "Failed", "Aborted", "Terminated")


class SimClock:
    """Simulated seconds since start: ``(monotonic() - start) * speed``.

    ``speed``: simulated seconds per wall second (> 0; 1 = real time).
    Raises ``SpecError("speed")`` otherwise.
    """

    def __init__(self, speed: float = 1.0, *, monotonic: Callable[[], float] = time.monotonic):
        if isinstance(speed, bool) or not isinstance(speed, int | float) or not (
                math.isfinite(speed) and speed > 0):
            raise SpecError("speed", f"must be a number > 0, got {speed!r}")
        self.speed = float(speed)
        self._monotonic = monotonic
        self._start = monotonic()

    def now(self) -> float:
        """Simulated seconds since the clock was made."""
        return (self._monotonic() - self._start) * self.speed


# --- node pools -------------------------------------------------------------------


def _mig_profile(resource: str) -> str | None:
    return resource.removeprefix(_MIG_PREFIX) if resource.startswith(_MIG_PREFIX) else None


def _pool(flavor: str, resource: str, total_units: int, model: str,
          units_per_gpu_node: int = 8) -> NodePool:
    mig = _mig_profile(resource)
    per_gpu = _MIG_INSTANCES.get(mig.split(".", 1)[0], 1) if mig else 1
    per_node = units_per_gpu_node * per_gpu
    return NodePool(flavor=flavor, nodes=max(1, math.ceil(total_units / per_node)),
                    units_per_node=per_node, gpu_resource=resource, gpu_model=model,
                    mig_profile=mig, mig_instances_per_gpu=per_gpu,
                    memory_mib=81559 // per_gpu)


def pools_from_json(data: Iterable[Mapping[str, Any]]
                    ) -> tuple[list[NodePool], dict[str, dict[str, str]]]:
    """Node pools from a JSON-able list (the CLI's ``--pools`` file), one item per flavor:
    ``{"flavor", "gpu_resource", "gpus" (physical GPUs), "gpus_per_node" (default
    8), "gpu_model", "node_labels"}``. A MIG resource (``nvidia.com/mig-1g.10gb``)
    gives ``7`` instances per GPU for ``1g`` (3 for 2g, 2 for 3g, 1 for 4g/7g),
    so ``gpus: 8`` of it is 56 schedulable units. Returns ``(pools, {flavor:
    node_labels})``. Raises ``SpecError`` naming the bad item's field.
    """
    pools, labels = [], {}
    for index, item in enumerate(data):
        try:
            flavor = item["flavor"]
            resource = item.get("gpu_resource") or "nvidia.com/gpu"
            units = int(item["gpus"])
            per_node = int(item.get("gpus_per_node") or 8)
        except (KeyError, TypeError, ValueError) as exc:
            raise SpecError(f"pools[{index}]", f"needs flavor and gpus: {exc}") from None
        if units < 1:
            continue
        mig = _mig_profile(resource)
        units *= _MIG_INSTANCES.get(mig.split(".", 1)[0], 1) if mig else 1
        pools.append(_pool(flavor, resource, units, str(item.get("gpu_model") or "NVIDIA GPU"),
                           per_node))
        labels[flavor] = {str(k): str(v) for k, v in (item.get("node_labels") or {}).items()}
    return pools, labels


def derive_kueue_pools(flavors: Iterable[dict], cluster_queues: Iterable[dict],
                       cohorts: Iterable[dict] = ()
                       ) -> tuple[list[NodePool], dict[str, dict[str, str]]]:
    """Node pools for a Kueue cluster from its objects: per ResourceFlavor, the GPU
    resource its quotas name and as many units as all ClusterQueues and Cohorts
    give it as ``nominalQuota`` (so the cluster holds what the quotas promise).
    The model is the ``nvidia.com/gpu.product`` node label (dashes as spaces)."""
    totals: dict[str, dict[str, int]] = {}
    for obj in (*cluster_queues, *cohorts):
        for group in (obj.get("spec") or {}).get("resourceGroups") or ():
            for flavor in group.get("flavors") or ():
                for res in flavor.get("resources") or ():
                    if res["name"] in _NOT_GPU:
                        continue
                    amount = int(quantity.parse(str(res.get("nominalQuota", 0))))
                    if amount > 0:
                        per = totals.setdefault(flavor["name"], {})
                        per[res["name"]] = per.get(res["name"], 0) + amount
    pools, labels = [], {}
    for rf in flavors:
        name = rf["metadata"]["name"]
        node_labels = dict((rf.get("spec") or {}).get("nodeLabels") or {})
        resources = totals.get(name)
        if not resources:
            continue
        resource = max(resources, key=lambda r: (resources[r], r))
        model = node_labels.get(_GPU_PRODUCT_LABEL, "NVIDIA GPU").replace("-", " ")
        pools.append(_pool(name, resource, resources[resource], model))
        labels[name] = node_labels
    return pools, labels


# --- reading objects ----------------------------------------------------------------


def _meta(obj: dict) -> dict:
    return obj.get("metadata") or {}


def _conds(obj: dict | None) -> dict[str, dict]:
    return {c["type"]: c for c in ((obj or {}).get("status") or {}).get("conditions") or ()}


def _count(value: Any, what: str) -> int:
    amount = quantity.parse(str(value))
    if amount != amount.to_integral_value() or amount < 0:
        raise SpecError(what, f"must be a whole count, got {value!r}")
    return int(amount)


def _gpu_request(template: dict) -> tuple[str, int] | None:
    """``(resource, units per pod)`` of the first GPU-like request in a pod template."""
    for container in ((template or {}).get("spec") or {}).get("containers") or ():
        for name, value in ((container.get("resources") or {}).get("requests") or {}).items():
            if name not in _NOT_GPU:
                return name, _count(value, f"requests[{name}]")
    return None


def _pod_shape(job: dict) -> tuple[int, str, int, int | None, dict]:
    """``(pods, gpu resource, GPUs per pod, activeDeadlineSeconds, pod template)`` of a
    batch/v1 Job, JobSet or vcjob (first role's shape; raises ``SpecError``)."""
    spec = job.get("spec") or {}
    if job.get("kind") == "JobSet":
        pods, template, deadline = 0, None, None
        for rj in spec.get("replicatedJobs") or ():
            job_spec = (rj.get("template") or {}).get("spec") or {}
            pods += int(rj.get("replicas") or 1) * int(job_spec.get("parallelism") or 1)
            template = template or job_spec.get("template")
            deadline = deadline or job_spec.get("activeDeadlineSeconds")
    elif "tasks" in spec:  # a Volcano vcjob
        tasks = spec.get("tasks") or ()
        pods = sum(int(t.get("replicas") or 0) for t in tasks)
        template = tasks[0].get("template") if tasks else None
        deadline = ((template or {}).get("spec") or {}).get("activeDeadlineSeconds")
    else:
        pods = int(spec.get("parallelism") or 1)
        template, deadline = spec.get("template"), spec.get("activeDeadlineSeconds")
    request = _gpu_request(template or {})
    if request is None or request[1] < 1 or pods < 1:
        raise SpecError("resources", "the job requests no GPUs")
    return pods, request[0], request[1], deadline, template or {}


@dataclass
class _Tracked:
    """What the controller knows of one job: the cluster refs and the simulator key."""

    uid: str
    key: str
    api_version: str
    kind: str
    name: str
    namespace: str
    workers: int
    fail_reason: str = ""
    workload: str | None = None
    admitted: bool = False
    done: bool = False
    retries: int = 0
    sim_job: SimJob | None = None
    extra: dict = field(default_factory=dict)

    def ref(self) -> dict:
        return {"apiVersion": self.api_version, "kind": self.kind,
                "metadata": {"name": self.name, "namespace": self.namespace, "uid": self.uid}}

    def workload_ref(self) -> dict:
        return {"metadata": {"name": self.workload, "namespace": self.namespace}}


def _fingerprint(objs: Iterable[dict]) -> str:
    digest = hashlib.sha256()
    for obj in sorted(objs, key=lambda o: (o.get("kind", ""), _meta(o).get("name", ""))):
        digest.update(json.dumps([obj.get("kind"), _meta(obj).get("name"), obj.get("spec")],
                                 sort_keys=True, default=str).encode())
    return digest.hexdigest()


def _quota_of(res: dict, resource_field: str) -> int | None:
    value = res.get(resource_field)
    return None if value is None else _count(value, resource_field)


def _flavor_quotas(obj: dict) -> tuple[FlavorQuota, ...]:
    """The GPU quotas of a ClusterQueue or Cohort: one per flavor.

    A flavor lists every GPU resource the group covers; the others' entries are
    ``nominalQuota: "0"`` without limits (``queues.backends.kueue.objects.resource_groups``)
    and are skipped when the flavor has an entry with a quota or a limit. A
    flavor whose only GPU entry is a zero quota without a borrowing limit is
    kept: in Kueue such a ClusterQueue borrows what its cohort lends (a
    borrow-only team).
    """
    out = []
    for group in (obj.get("spec") or {}).get("resourceGroups") or ():
        for flavor in group.get("flavors") or ():
            gpu = [res for res in flavor.get("resources") or () if res["name"] not in _NOT_GPU]
            for res in gpu:
                nominal = _count(res.get("nominalQuota", 0), "nominalQuota")
                if nominal == 0 and res.get("borrowingLimit") is None and len(gpu) > 1:
                    continue  # a flavor listing another resource's zero quota
                out.append(FlavorQuota(
                    flavor=flavor["name"], gpu_resource=res["name"], nominal_gpus=nominal,
                    borrowing_limit_gpus=_quota_of(res, "borrowingLimit"),
                    lending_limit_gpus=_quota_of(res, "lendingLimit")))
    return tuple(out)


def _team_spec(cq: dict) -> TeamQueueSpec:
    spec = cq.get("spec") or {}
    preemption = spec.get("preemption") or {}
    borrow = preemption.get("borrowWithinCohort") or {}
    return TeamQueueSpec(
        slug=_meta(cq)["name"], display_name=_meta(cq)["name"],
        cohort=spec.get("cohortName") or None, quotas=_flavor_quotas(cq),
        reclaim_within_cohort=preemption.get("reclaimWithinCohort", "Never"),
        within_cluster_queue=preemption.get("withinClusterQueue", "Never"),
        borrow_within_cohort=borrow.get("policy", "Never"),
        borrow_within_cohort_max_priority=borrow.get("maxPriorityThreshold"),
    )


def _cohort_spec(cohort: dict) -> CohortSpec:
    spec = cohort.get("spec") or {}
    return CohortSpec(name=_meta(cohort)["name"], parent=spec.get("parentName") or None,
                      shared_pool=_flavor_quotas(cohort))


def _created(obj: dict) -> tuple[str, str, str]:
    """Queue order of new jobs: creation time (RFC 3339 sorts as text), then name."""
    meta = _meta(obj)
    return (str(meta.get("creationTimestamp") or ""), meta.get("namespace", ""), meta["name"])


def _stamp() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


# --- the controller -----------------------------------------------------------------


class SimController:
    """Kueue's or Volcano's controllers, simulated, over a cluster port (module doc).

    * ``cluster``: a :class:`queues.cluster.KubernetesCluster` (or any object with
      its ``get``/``list``/``create``/``patch``/``delete`` methods).
    * ``backend``: ``"kueue"`` or ``"volcano"``.
    * ``clock``: a :class:`SimClock` (default real time); ``speed`` makes one.
    * ``node_pools`` / ``flavor_labels``: the GPUs (required for Volcano, whose
      jobs find their pool by node selector and GPU resource); Kueue derives
      them from the ResourceFlavors when not given.
    * ``default_duration``: simulated seconds a job without a declared duration
      or deadline runs (> 0). ``requeue_delay``: seconds before a preempted job
      is back in its queue. ``seed``: the DCGM exporter's noise seed.

    Thread-safe: :meth:`step` and :meth:`metrics_text` may run on different
    threads. Raises ``SpecError`` for a bad backend, speed or duration.
    """

    def __init__(self, cluster: Any, *, backend: str = "kueue", clock: SimClock | None = None,
                 speed: float = 1.0, node_pools: Iterable[NodePool] | None = None,
                 flavor_labels: Mapping[str, Mapping[str, str]] | None = None,
                 default_duration: float = 60.0, requeue_delay: float = 1.0,
                 seed: int = 0) -> None:
        if backend not in BACKENDS:
            raise SpecError("backend", f"must be one of {', '.join(BACKENDS)}; got {backend!r}")
        if not (isinstance(default_duration, int | float) and default_duration > 0):
            raise SpecError("default_duration", f"must be > 0 seconds, got {default_duration!r}")
        self.cluster = cluster
        self.backend = backend
        self.clock = clock or SimClock(speed)
        self.default_duration = float(default_duration)
        self.requeue_delay = requeue_delay
        self.seed = seed
        self._given_pools = list(node_pools) if node_pools is not None else None
        self._flavor_labels = {k: dict(v) for k, v in (flavor_labels or {}).items()}
        if backend in _POOLS_REQUIRED and not self._given_pools:
            raise SpecError("node_pools", "a Volcano cluster needs node pools (--pools)")
        self.sim: SimulatorBase | None = None
        self._base = 0.0  # clock reading when the current simulator started
        self._event_index = 0  # events of the current simulator already applied
        self._quota_fp: str | None = None
        self._jobs: dict[str, _Tracked] = {}  # by job uid
        self._by_key: dict[str, _Tracked] = {}
        self._written_status: dict[str, dict] = {}
        self._opened: set[str] = set()
        self._lock = threading.RLock()
        self.errors = 0

    # ------------------------------------------------------------------ driving

    def step(self) -> list[SimEvent]:
        """One poll: read the cluster, feed the simulator, advance it to the clock and
        write back. Returns the simulator events applied. Cluster errors on one object
        are logged and retried on the next step (level-triggered: the simulator's
        state is re-checked against the objects); an unreachable cluster raises
        :class:`queues.errors.ClusterError`."""
        with self._lock:
            return getattr(self, _STEPS[self.backend])()

    def run(self, stop: threading.Event, interval: float = 0.5) -> None:
        """:meth:`step` every ``interval`` wall seconds until ``stop`` is set; errors are
        logged, never raised."""
        while not stop.is_set():
            try:
                self.step()
            except Exception:  # noqa: BLE001 - a demo loop must outlive any one failure
                self.errors += 1
                log.exception("simulated controller step failed")
            stop.wait(interval)

    def now(self) -> float:
        """The simulator's clock (simulated seconds since it was last rebuilt)."""
        return max(0.0, self.clock.now() - self._base)

    def metrics_text(self) -> str:
        """dcgm-exporter's ``/metrics`` text for every running pod now (``harness.sim.dcgm``)."""
        with self._lock:
            if self.sim is None:
                return render_metrics((), now=self.clock.now(), seed=self.seed)
            return render_metrics(gpu_units(self.sim), now=self.clock.now(), seed=self.seed)

    def job_state(self, namespace: str, name: str) -> str | None:
        """The simulator's state of a job (``Pending``, ``Admitted``, ``Finished``,
        ``Cancelled``) or ``None`` when not tracked: for tests and logs."""
        with self._lock:
            for tracked in self._jobs.values():
                if (tracked.namespace, tracked.name) == (namespace, name) and self.sim:
                    record = self.sim.workloads.get(tracked.key)
                    return record.state if record else None
        return None

    # ------------------------------------------------------------ shared helpers

    def _safe(self, what: str, fn: Callable[[], Any]) -> Any:
        try:
            return fn()
        except (ClusterError, LookupError) as exc:
            self.errors += 1
            log.warning("simulated controller: %s: %s", what, exc)
            return None

    def _declared(self, job: dict, deadline: int | None) -> tuple[float, str, str, str]:
        """``(duration, outcome, profile, failure reason)`` from the job's annotations."""
        notes = _meta(job).get("annotations") or {}
        duration = None
        try:
            duration = float(notes[SIM_DURATION_ANNOTATION])
            if not (math.isfinite(duration) and duration > 0):
                duration = None
        except (KeyError, ValueError):
            pass
        outcome = notes.get(SIM_OUTCOME_ANNOTATION, "Succeeded")
        outcome = outcome if outcome in OUTCOMES else "Succeeded"
        profile = notes.get(SIM_PROFILE_ANNOTATION, "training")
        profile = profile if profile in PROFILES else "training"
        reason = ""
        if deadline and (duration is None or duration > deadline):
            if duration is not None:
                outcome, reason = "Failed", "DeadlineExceeded"
            duration = float(deadline)
        return duration or self.default_duration, outcome, profile, reason

    def _advance(self) -> list[SimEvent]:
        """Advance the simulator to the clock; every event since the last call (including
        those of cancellations made during this step)."""
        if self.sim is None:
            return []
        self.sim.advance(max(self.sim.now, self.now()))
        events = self.sim.events[self._event_index:]
        self._event_index = len(self.sim.events)
        return events

    def _new_key(self, namespace: str, name: str) -> str:
        """``name`` in the simulator; a reused name (a job deleted and submitted again)
        gets ``-r<n>`` (its pods still start with the job's name)."""
        candidate, n = name, 0
        while self.sim is not None and f"{namespace}/{candidate}" in self.sim.workloads:
            n += 1
            candidate = f"{name}-r{n}"
        return candidate

    def _rebuild(self, make: Callable[[], SimulatorBase]) -> None:
        """A new simulator for a changed quota tree: running jobs are resubmitted first
        with their remaining time (and admitted at once when they still fit), then
        pending ones in their old order."""
        old, old_now = self.sim, self.now()
        self.sim = make()
        self._base = self.clock.now()
        self._event_index = 0
        if old is None:
            return
        running = [r for r in old.running()]
        pending = sorted((r for r in old.workloads.values() if r.state == "Pending"),
                         key=lambda r: (r.submitted, r.seq))
        for record in running:
            remaining = max(0.001, (record.last_admitted or 0) + record.job.duration - old_now)
            self._resubmit(record.key, record.job, duration=remaining)
        if running:
            self.sim.advance(0.0)
        for record in pending:
            self._resubmit(record.key, record.job, duration=record.job.duration)

    def _resubmit(self, key: str, job: SimJob, *, duration: float) -> None:
        tracked = self._by_key.get(key)
        if tracked is None:
            return
        replacement = SimJob(**{**{f: getattr(job, f) for f in SimJob.__dataclass_fields__},
                                "submit_time": 0.0, "duration": duration})
        try:
            self.sim.submit(replacement)
        except SpecError as exc:  # its queue is gone: leave it where it is
            log.warning("simulated controller: %s not resubmitted: %s", key, exc.message)

    def _forget(self, tracked: _Tracked) -> None:
        self._jobs.pop(tracked.uid, None)
        self._by_key.pop(tracked.key, None)

    def _cancel(self, tracked: _Tracked) -> None:
        if self.sim is not None and tracked.key in self.sim.workloads:
            self.sim.cancel(tracked.key)

    # ---------------------------------------------------------------- Kueue

    def _step_kueue(self) -> list[SimEvent]:
        c = self.cluster
        cqs = c.list(KUEUE, "ClusterQueue")
        cohorts = c.list(KUEUE, "Cohort")
        flavors = c.list(KUEUE, "ResourceFlavor")
        fingerprint = _fingerprint([*cqs, *cohorts, *flavors])
        if fingerprint != self._quota_fp:
            if self._given_pools is not None:
                pools = self._given_pools
            else:
                pools, labels = derive_kueue_pools(flavors, cqs, cohorts)
                self._flavor_labels = {**labels, **self._flavor_labels}
            for rf in flavors:
                self._flavor_labels.setdefault(_meta(rf)["name"], dict(
                    (rf.get("spec") or {}).get("nodeLabels") or {}))
            teams = [_team_spec(cq) for cq in cqs]
            cohort_specs = [_cohort_spec(co) for co in cohorts]
            self._rebuild(lambda: KueueSimulator(teams, cohort_specs, pools,
                                                 requeue_delay=self.requeue_delay))
            self._quota_fp = fingerprint
        local_queues = {(_meta(lq)["namespace"], _meta(lq)["name"]):
                        (lq.get("spec") or {}).get("clusterQueue")
                        for lq in c.list(KUEUE, "LocalQueue")}
        priorities = {_meta(p)["name"]: int(p.get("value") or 0)
                      for p in c.list(KUEUE, "WorkloadPriorityClass")}
        jobs = [*c.list(BATCH_API_VERSION, "Job", QUEUE_NAME_LABEL),
                *self._safe_list(JOBSET_API_VERSION, "JobSet", QUEUE_NAME_LABEL)]
        workloads: dict[str, dict] = {}
        for wl in c.list(KUEUE, "Workload"):
            for owner in _meta(wl).get("ownerReferences") or ():
                if owner.get("controller"):
                    workloads[owner["uid"]] = wl
        seen = set()
        for job in sorted(jobs, key=_created):
            uid = _meta(job).get("uid")
            seen.add(uid)
            self._safe(f"job {_meta(job).get('namespace')}/{_meta(job).get('name')}",
                       lambda job=job, uid=uid: self._observe_kueue_job(
                           job, workloads.get(uid), local_queues, priorities))
        for uid in list(self._jobs):
            if uid not in seen:
                tracked = self._jobs[uid]
                self._cancel(tracked)
                if tracked.workload:
                    self._safe("delete workload", lambda t=tracked: c.delete(
                        KUEUE, "Workload", t.workload, t.namespace))
                self._forget(tracked)
        events = self._advance()
        for event in events:
            tracked = self._by_key.get(event.workload)
            if tracked is not None and not tracked.done:
                self._safe(f"{event.kind} {event.workload}",
                           lambda e=event, t=tracked: self._apply_kueue(e, t))
        self._write_cq_status(cqs)
        return events

    def _safe_list(self, api_version: str, kind: str, selector: str) -> list[dict]:
        try:
            return self.cluster.list(api_version, kind, selector)
        except ClusterError as exc:  # JobSet CRD not served: no JobSets
            log.debug("no %s: %s", kind, exc)
            return []

    def _observe_kueue_job(self, job: dict, workload: dict | None,
                           local_queues: dict, priorities: dict) -> None:
        meta = _meta(job)
        uid, ns, name = meta["uid"], meta["namespace"], meta["name"]
        tracked = self._jobs.get(uid)
        if tracked is not None:
            if workload is not None and (workload.get("spec") or {}).get("active") is False \
                    and not tracked.done:
                self._deactivate(tracked, job, workload)
            return
        job_done = job["kind"] == "JobSet" and _conds(job).keys() & set(_JOBSET_DONE) or \
            job["kind"] == "Job" and _conds(job).keys() & set(_JOB_DONE)
        if job_done or (workload is not None and (
                "Finished" in _conds(workload)
                or (workload.get("spec") or {}).get("active") is False)):
            return
        if workload is None and not (job.get("spec") or {}).get("suspend"):
            return  # not created suspended: not Kueue's to manage
        labels = meta.get("labels") or {}
        cq = local_queues.get((ns, labels.get(QUEUE_NAME_LABEL)))
        if self.sim is None or cq is None or cq not in self.sim.cluster_queues:
            return  # Kueue keeps it (inadmissible) until its LocalQueue/ClusterQueue exists
        pods, resource, per_pod, deadline, _ = _pod_shape(job)
        priority_class = labels.get(PRIORITY_CLASS_LABEL, "")
        priority = priorities.get(priority_class, 0)
        if workload is None:
            workload = ko.create_workload(self.cluster, job, priority=priority,
                                          priority_class=priority_class)
        duration, outcome, profile, reason = self._declared(job, deadline)
        sim_job = SimJob(name=self._new_key(ns, name), namespace=ns, workers=pods,
                         gpus_per_worker=per_pod, gpu_resource=resource, queue=cq,
                         priority=priority, priority_class=priority_class or None,
                         duration=duration, outcome=outcome, profile=profile,
                         submit_time=self.now())
        tracked = _Tracked(uid=uid, key=sim_job.key, api_version=job["apiVersion"],
                           kind=job["kind"], name=name, namespace=ns, workers=pods,
                           fail_reason=reason, workload=_meta(workload)["name"],
                           sim_job=sim_job)
        tracked.extra["workload_uid"] = _meta(workload).get("uid", "")
        self.sim.submit(sim_job)
        self._jobs[uid] = tracked
        self._by_key[tracked.key] = tracked

    def _deactivate(self, tracked: _Tracked, job: dict, workload: dict) -> None:
        """``spec.active: false``: evicted (``Deactivated``), quota released, job suspended."""
        self._cancel(tracked)
        tracked.done = True
        c, now = self.cluster, _stamp()
        message = "The workload is deactivated"
        meta = _meta(workload)
        c.patch(KUEUE, "Workload", meta["name"], meta["namespace"], {"status": {"admission": None}},
                subresource="status", field_manager=ko.MANAGER)
        ko.set_conditions(c, workload, [
            {"type": "Evicted", "status": "True", "reason": "Deactivated", "message": message},
            {"type": "QuotaReserved", "status": "False", "reason": "Pending", "message": message},
            {"type": "Admitted", "status": "False", "reason": "NoReservation",
             "message": "The workload has no reservation"},
            {"type": "Requeued", "status": "False", "reason": "Deactivated", "message": message},
        ], now=now)
        ko.record_event(c, workload, reason="EvictedDueToDeactivated", message=message, now=now,
                        component="kueue-admission")
        if not (job.get("spec") or {}).get("suspend"):
            c.patch(tracked.api_version, tracked.kind, tracked.name, tracked.namespace,
                    {"spec": {"suspend": True}}, field_manager=ko.MANAGER)
            ko.set_job_status(c, tracked.ref(), active=0, ready=0)
        tracked.admitted = False

    def _apply_kueue(self, event: SimEvent, tracked: _Tracked) -> None:
        c, now, wl = self.cluster, _stamp(), tracked.workload_ref()
        if event.kind == "pending":
            ko.set_pending(c, wl, reason=event.reason, message=event.message, now=now)
            ko.record_event(c, ko.get_workload(c, wl), reason="Pending", message=event.message,
                            type="Warning", now=now)
        elif event.kind == "admitted":
            if tracked.admitted and tracked.extra.get("flavor") == event.flavor:
                return  # still running after a rebuild of the simulator
            record = self.sim.workloads[event.workload]
            waited = max(0, round((record.last_admitted or 0) - record.submitted))
            live = ko.admit(c, wl, cluster_queue=event.queue, flavor=event.flavor, now=now)
            ko.record_event(c, live, reason="QuotaReserved", now=now, message=(
                f"Quota reserved in ClusterQueue {event.queue}, wait time since queued was "
                f"{waited}s"))
            ko.record_event(c, live, reason="Admitted", now=now, message=(
                f"Admitted by ClusterQueue {event.queue}, wait time since reservation was 0s"))
            ko.unsuspend_job(c, tracked.ref(), now=now,
                             node_selector=self._flavor_labels.get(event.flavor) or None)
            ko.set_job_status(c, tracked.ref(), active=tracked.workers, ready=tracked.workers)
            ko.set_pods_ready(c, wl, now=now)
            tracked.admitted = True
            tracked.extra["flavor"] = event.flavor
        elif event.kind == "preempted":
            by = self._by_key.get(event.by or "")
            ko.preempt(c, wl, tracked.ref(), reason=event.reason, now=now,
                       preemptor_uid=by.extra.get("workload_uid", "") if by else "",
                       preemptor_job_uid=by.uid if by else "")
            tracked.admitted = False
        elif event.kind == "finished":
            succeeded = event.reason == "Succeeded"
            message = event.message
            if tracked.fail_reason == "DeadlineExceeded":
                message = "Job was active longer than specified deadline"
            ko.finish(c, wl, succeeded=succeeded, message=message, now=now)
            ko.set_job_status(c, tracked.ref(), active=0, ready=0,
                              succeeded=tracked.workers if succeeded else 0,
                              failed=0 if succeeded else 1, complete=succeeded,
                              reason=tracked.fail_reason, now=now,
                              message=message if tracked.fail_reason else "")
            tracked.done = True
            tracked.admitted = False

    def _write_cq_status(self, cqs: list[dict]) -> None:
        if not isinstance(self.sim, KueueSimulator):
            return
        usage: dict[str, dict[tuple[str, str], int]] = {}
        pending: dict[str, int] = {}
        admitted: dict[str, int] = {}
        for record in self.sim.workloads.values():
            queue = record.job.queue_name
            if record.state == "Admitted":
                per = usage.setdefault(queue, {})
                key = (record.flavor, record.job.gpu_resource)
                per[key] = per.get(key, 0) + record.job.total_gpus
                admitted[queue] = admitted.get(queue, 0) + 1
            elif record.state == "Pending" and record.submitted <= self.sim.now:
                pending[queue] = pending.get(queue, 0) + 1
        for cq in cqs:
            name = _meta(cq)["name"]
            nominal = {(q.flavor, q.gpu_resource): q.nominal_gpus for q in _flavor_quotas(cq)}
            flavors = []
            for (flavor, resource), nominal_units in nominal.items():
                used = usage.get(name, {}).get((flavor, resource), 0)
                flavors.append({"name": flavor, "resources": [{
                    "name": resource, "total": str(used),
                    "borrowed": str(max(0, used - nominal_units))}]})
            status = {
                "conditions": [{"type": "Active", "status": "True", "reason": "Ready",
                                "message": "Can admit new workloads",
                                "lastTransitionTime": (((cq.get("status") or {}).get(
                                    "conditions") or [{}])[0].get("lastTransitionTime")
                                    or _stamp().strftime("%Y-%m-%dT%H:%M:%SZ")),
                                "observedGeneration": _meta(cq).get("generation", 1)}],
                "flavorsUsage": flavors,
                "flavorsReservation": flavors,
                "pendingWorkloads": pending.get(name, 0),
                "reservingWorkloads": admitted.get(name, 0),
                "admittedWorkloads": admitted.get(name, 0),
            }
            key = json.dumps([status["flavorsUsage"], status["pendingWorkloads"],
                              status["admittedWorkloads"], _meta(cq).get("generation")])
            if self._written_status.get(name) == key:
                continue
            written = self._safe(f"ClusterQueue {name} status", lambda n=name, s=status: (
                self.cluster.patch(KUEUE, "ClusterQueue", n, None, {"status": s},
                                   subresource="status", field_manager=ko.MANAGER)))
            if written is not None:
                self._written_status[name] = key

    # -------------------------------------------------------------- Volcano

    def _step_volcano(self) -> list[SimEvent]:
        c = self.cluster
        queues = c.list(QUEUE_API_VERSION, "Queue")
        for queue in queues:
            name = _meta(queue)["name"]
            if ((queue.get("status") or {}).get("state")) or name in self._opened:
                continue
            if self._safe(f"open queue {name}",
                          lambda n=name: vo.set_queue_state(c, n, "Open")) is not None:
                self._opened.add(name)
        fingerprint = _fingerprint(queues)
        if fingerprint != self._quota_fp:
            manifests = [q for q in queues if _meta(q)["name"] not in ("root", "default")]
            self._rebuild(lambda: VolcanoSimulator(manifests, self._given_pools,
                                                   requeue_delay=self.requeue_delay))
            self._quota_fp = fingerprint
        namespaces = {_meta(cmd)["namespace"] for cmd in c.list(COMMAND_API_VERSION, "Command")}
        for namespace in sorted(namespaces):
            self._safe(f"commands in {namespace}",
                       lambda ns=namespace: vo.execute_commands(c, ns, now=_stamp()))
        priorities = {_meta(p)["name"]: int(p.get("value") or 0)
                      for p in c.list("scheduling.k8s.io/v1", "PriorityClass")}
        seen = set()
        for job in sorted(c.list(VCJOB_API_VERSION, "Job"), key=_created):
            uid = _meta(job).get("uid")
            seen.add(uid)
            self._safe(f"vcjob {_meta(job).get('namespace')}/{_meta(job).get('name')}",
                       lambda job=job: self._observe_vcjob(job, priorities))
        for uid in list(self._jobs):
            if uid not in seen:
                tracked = self._jobs[uid]
                self._cancel(tracked)
                self._safe("delete podgroup", lambda t=tracked: c.delete(
                    PODGROUP_API_VERSION, "PodGroup", podgroup_name(t.name, t.uid), t.namespace))
                self._forget(tracked)
        events = self._advance()
        for event in events:
            tracked = self._by_key.get(event.workload)
            if tracked is not None and not tracked.done:
                self._safe(f"{event.kind} {event.workload}",
                           lambda e=event, t=tracked: self._apply_volcano(e, t))
        return events

    def _pool_for(self, template: dict, resource: str) -> str | None:
        selector = ((template or {}).get("spec") or {}).get("nodeSelector") or {}
        for pool in self._given_pools or ():
            labels = self._flavor_labels.get(pool.flavor, {})
            if pool.gpu_resource == resource and all(selector.get(k) == v
                                                     for k, v in labels.items()):
                return pool.flavor
        return None

    def _observe_vcjob(self, job: dict, priorities: dict) -> None:
        meta = _meta(job)
        uid, ns, name = meta["uid"], meta["namespace"], meta["name"]
        phase = ((job.get("status") or {}).get("state") or {}).get("phase", "")
        tracked = self._jobs.get(uid)
        if tracked is not None:
            if phase in ("Aborted", "Aborting", "Terminated", "Terminating") and not tracked.done:
                self._cancel(tracked)
                tracked.done = True
                vo.set_podgroup(self.cluster, tracked.ref(), phase="Completed", now=_stamp())
            return
        if phase in _VC_FINAL or phase in ("Aborting", "Terminating"):
            return
        spec = job.get("spec") or {}
        queue = spec.get("queue") or "default"
        if self.sim is None or queue not in self.sim.queues:
            return
        pods, resource, per_pod, deadline, template = _pod_shape(job)
        flavor = self._pool_for(template, resource)
        if vo.get_podgroup(self.cluster, job) is None:
            vo.create_podgroup(self.cluster, job)
        vo.set_job_state(self.cluster, job, phase="Pending", now=_stamp())
        duration, outcome, profile, reason = self._declared(job, deadline)
        min_available = int(spec.get("minAvailable") or pods)
        sim_job = SimJob(name=self._new_key(ns, name), namespace=ns, workers=pods,
                         gpus_per_worker=per_pod, gpu_resource=resource, queue=queue,
                         flavor=flavor, priority=priorities.get(spec.get("priorityClassName"), 0),
                         priority_class=spec.get("priorityClassName") or None,
                         min_available=min(min_available, pods), duration=duration,
                         outcome=outcome, profile=profile, submit_time=self.now())
        tracked = _Tracked(uid=uid, key=sim_job.key, api_version=VCJOB_API_VERSION, kind="Job",
                           name=name, namespace=ns, workers=pods, fail_reason=reason,
                           sim_job=sim_job)
        tracked.extra["job"] = job
        self.sim.submit(sim_job)
        self._jobs[uid] = tracked
        self._by_key[tracked.key] = tracked

    def _apply_volcano(self, event: SimEvent, tracked: _Tracked) -> None:
        c, now = self.cluster, _stamp()
        job = c.get(VCJOB_API_VERSION, "Job", tracked.name, tracked.namespace)
        if job is None:
            return
        if event.kind == "inqueue":
            vo.set_podgroup(c, job, phase="Inqueue", now=now)
        elif event.kind == "pending":
            record = self.sim.workloads[event.workload]
            phase = self.sim.podgroup_status(event.workload)["phase"]
            vo.set_podgroup(c, job, phase=phase if record.state == "Pending" else "Pending",
                            unschedulable=(event.reason, event.message), now=now)
        elif event.kind == "admitted":
            if tracked.admitted and tracked.extra.get("flavor") == event.flavor:
                return  # still running after a rebuild of the simulator
            tracked.extra["flavor"] = event.flavor
            running = len(self.sim.workloads[event.workload].placements)
            vo.set_podgroup(c, job, phase="Running", running=running, scheduled=True, now=now)
            vo.set_job_state(c, job, phase="Running", running=running, now=now,
                             retry_count=tracked.retries or None)
            tracked.admitted = True
        elif event.kind == "preempted":
            tracked.retries += 1
            vo.set_podgroup(c, job, phase="Pending", now=now,
                            unschedulable=("NotEnoughResources", event.message))
            vo.set_job_state(c, job, phase="Restarting", reason="PodEvicted",
                             message=event.message, retry_count=tracked.retries, now=now)
            vo.set_job_state(c, job, phase="Pending", reason="PodEvicted",
                             message=event.message, retry_count=tracked.retries, now=now)
            tracked.admitted = False
        elif event.kind == "finished":
            succeeded = event.reason in ("Succeeded", "Completed")
            vo.set_podgroup(c, job, phase="Completed", now=now)
            vo.set_job_state(c, job, phase="Completed" if succeeded else "Failed", now=now,
                             reason=tracked.fail_reason or ("" if succeeded else "PodFailed"),
                             message=event.message, retry_count=tracked.retries or None)
            tracked.done = True
            tracked.admitted = False
