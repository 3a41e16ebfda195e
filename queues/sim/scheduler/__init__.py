"""A deterministic scheduler simulator: Kueue and Volcano semantics on a simulated clock.

Pure (no Django, no ``kubernetes``): jobs (``SimJob``) go in, events
(``SimEvent``), per-queue usage (``UsageSample``) and workload records come out.
``KueueSimulator`` models ClusterQueues and Cohorts from the portal's specs;
``VolcanoSimulator`` models the capacity plugin's Queues. Both share the
discrete-event core in ``core.py``: ``submit``, ``advance(t)``, ``run()``.

    sim = KueueSimulator(teams, cohorts, node_pools)
    sim.submit_all(jobs)
    result = sim.run()
    result.admissions()   # [(time, "ns/job", "h100"), ...]
"""

from .core import NodeInventory, SimResult, SimulatorBase, WorkloadRecord
from .kueue import HUMAN_PREEMPTION_REASONS, KueueSimulator
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
from .volcano import VolcanoQueue, VolcanoSimulator

__all__ = [
    "DEFAULT_GPU_RESOURCE",
    "HUMAN_PREEMPTION_REASONS",
    "OUTCOMES",
    "PROFILES",
    "KueueSimulator",
    "NodeInventory",
    "NodePool",
    "PodPlacement",
    "SimEvent",
    "SimJob",
    "SimResult",
    "SimulatorBase",
    "UsageSample",
    "VolcanoQueue",
    "VolcanoSimulator",
    "WorkloadRecord",
    "job_uid",
]
