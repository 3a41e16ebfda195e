"""A deterministic scheduler simulator: Kueue and Volcano semantics on a simulated clock.

Pure (no Django, no ``kubernetes``): jobs (``SimJob``) go in, events
(``SimEvent``), per-queue usage (``UsageSample``) and workload records come out.
Each backend brings its simulator (``queues/backends/<name>/model.py``:
``KueueSimulator`` models ClusterQueues and Cohorts from the portal's specs,
``VolcanoSimulator`` the capacity plugin's Queues); both share the
discrete-event core in ``core.py``: ``submit``, ``advance(t)``, ``run()``.
Get one through the backend: ``queues.backends.get(name).simulator(...)``.

    sim = queues.backends.get("kueue").simulator(flavors=..., teams=..., cohorts=...,
                                                 node_pools=...)
    sim.submit_all(jobs)
    result = sim.run()
    result.admissions()   # [(time, "ns/job", "h100"), ...]
"""

from .core import NodeInventory, SimResult, SimulatorBase, WorkloadRecord
from .model import (
    DEFAULT_GPU_RESOURCE,
    OUTCOMES,
    PROFILES,
    NodePool,
    PodPlacement,
    SimEvent,
    SimJob,
    UsageSample,
    job_uid,
)

__all__ = [
    "DEFAULT_GPU_RESOURCE",
    "OUTCOMES",
    "PROFILES",
    "NodeInventory",
    "NodePool",
    "PodPlacement",
    "SimEvent",
    "SimJob",
    "SimResult",
    "SimulatorBase",
    "UsageSample",
    "WorkloadRecord",
    "job_uid",
]
