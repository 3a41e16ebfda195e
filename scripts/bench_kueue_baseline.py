#!/usr/bin/env python3
"""Kueue's scheduler scalability baseline, run through our Kueue simulator.

Scenario (kubernetes-sigs/kueue test/performance/scheduler/configs/baseline/
generator.yaml): 5 cohorts x 6 ClusterQueues, each with nominalQuota 20 and
borrowingLimit 100 of one resource in one flavor, reclaimWithinCohort Any,
withinClusterQueue LowerPriority; per ClusterQueue three generators running in
parallel: 350 "small" workloads (1 unit, 200 ms, priority 50) one every 100 ms,
100 "medium" (5 units, 500 ms, priority 100) one every 500 ms and 50 "large"
(20 units, 1 s, priority 200) one every 1.2 s; 15,000 workloads in all. (The
generator waits one interval before each creation, so the first small workload
appears at 100 ms.) Kueue's runner uses CPU as the resource; here it is
``nvidia.com/gpu``, the units are the same.

Measured like Kueue's recorder (test/performance/scheduler/runner/recorder):
mean ClusterQueue usage = time-integral of admitted units over all ClusterQueues
/ (sum of nominal quotas x observed time), time to admission = creation to the
(last) admission, averaged per class; plus the makespan (first creation to last
completion) in simulated seconds and the wall time of the simulation.

Published baseline (configs/baseline/rangespec.yaml, averages of 5 runs with
SchedulingEquivalenceHashing): 351 s wall for the run, 55.9 % usage, time to
admission 16.5 s (large), 76.8 s (medium), 215 s (small).

Usage: ``python scripts/bench_kueue_baseline.py [--json out.json] [--profile]``
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from queues.backends.kueue.model import KueueSimulator  # noqa: E402
from queues.schedmodel import SimJob
from queues.specs import CohortSpec, FlavorQuota, TeamQueueSpec  # noqa: E402

COHORTS, QUEUES_PER_COHORT, NOMINAL, BORROWING_LIMIT = 5, 6, 20, 100
#: class -> (count per queue, creation interval s, units, running time s, priority)
CLASSES = {
    "small": (350, 0.1, 1, 0.2, 50),
    "medium": (100, 0.5, 5, 0.5, 100),
    "large": (50, 1.2, 20, 1.0, 200),
}
PUBLISHED = {"wall_s": 351.1, "usage_pct": 55.9,
             "admission_s": {"large": 16.5, "medium": 76.8, "small": 215.5}}


def build(requeue_delay: float = 1.0) -> tuple[KueueSimulator, list[SimJob]]:
    """The baseline's ClusterQueues and its 15,000 workloads."""
    cohorts = [CohortSpec(name=f"cohort-{c}") for c in range(COHORTS)]
    teams, jobs = [], []
    for c in range(COHORTS):
        for q in range(QUEUES_PER_COHORT):
            slug = f"cq-0-{q}-cohort-{c}"
            teams.append(TeamQueueSpec(
                slug=slug, display_name=slug, cohort=f"cohort-{c}",
                quotas=(FlavorQuota(flavor="rf", gpu_resource="nvidia.com/gpu",
                                    nominal_gpus=NOMINAL,
                                    borrowing_limit_gpus=BORROWING_LIMIT),),
                reclaim_within_cohort="Any", within_cluster_queue="LowerPriority",
            ))
            for set_index, (name, (count, every, units, runtime, priority)) in enumerate(
                    CLASSES.items()):
                for i in range(count):
                    jobs.append(SimJob(
                        name=f"{name}-{set_index}-{i}-0", namespace=slug, workers=1,
                        gpus_per_worker=units, priority=priority,
                        submit_time=round((i + 1) * every, 6), duration=runtime,
                        labels={"class": name},
                    ))
    return KueueSimulator(teams, cohorts, requeue_delay=requeue_delay), jobs


def measure(sim: KueueSimulator, result) -> dict:
    """Makespan, mean ClusterQueue usage and time to admission per class."""
    records = list(result.workloads.values())
    start = min(r.submitted for r in records)
    makespan_end = max(r.finished for r in records if r.finished is not None)
    used = 0.0
    last: dict[str, tuple[float, int]] = {}
    for sample in result.usage:
        if sample.queue in last:
            t0, units = last[sample.queue]
            used += units * (sample.time - t0)
        last[sample.queue] = (sample.time, sample.gpus)
    observed = makespan_end  # ClusterQueues exist from t=0 in the simulation
    nominal_total = NOMINAL * len(sim.cluster_queues)
    per_class: dict[str, list[float]] = {}
    evictions: dict[str, int] = {}
    for r in records:
        per_class.setdefault(r.job.labels["class"], []).append(r.wait)
        evictions[r.job.labels["class"]] = evictions.get(r.job.labels["class"], 0) + r.evictions
    return {
        "workloads": len(records),
        "finished": sum(r.state == "Finished" for r in records),
        "makespan_s": round(makespan_end - start, 3),
        "usage_pct": round(100 * used / (nominal_total * observed), 1),
        "admission_s": {c: round(sum(w) / len(w), 2) for c, w in sorted(per_class.items())},
        "evictions": dict(sorted(evictions.items())),
        "events": len(result.events),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", type=Path, help="write the figures to this file")
    parser.add_argument("--profile", action="store_true", help="print a cProfile summary")
    parser.add_argument("--requeue-delay", type=float, default=1.0,
                        help="seconds before a preempted workload is queued again (default 1)")
    args = parser.parse_args(argv)

    wall0 = time.perf_counter()
    sim, jobs = build(args.requeue_delay)
    sim.submit_all(jobs)
    profiler = cProfile.Profile() if args.profile else None
    if profiler:
        profiler.enable()
    result = sim.run()
    if profiler:
        profiler.disable()
    wall = time.perf_counter() - wall0
    figures = measure(sim, result)
    figures["wall_s"] = round(wall, 2)

    print(f"{'figure':<28}{'simulator':>12}{'Kueue baseline':>16}")
    print(f"{'workloads (finished)':<28}{figures['finished']:>12}{15000:>16}")
    print(f"{'makespan, simulated s':<28}{figures['makespan_s']:>12}{'-':>16}")
    print(f"{'mean ClusterQueue usage %':<28}{figures['usage_pct']:>12}"
          f"{PUBLISHED['usage_pct']:>16}")
    for name in ("large", "medium", "small"):
        print(f"{'time to admission ' + name + ', s':<28}{figures['admission_s'][name]:>12}"
              f"{PUBLISHED['admission_s'][name]:>16}")
    print(f"{'evictions':<28}{sum(figures['evictions'].values()):>12}{'-':>16}")
    print(f"{'requeue delay, s':<28}{args.requeue_delay:>12}{'-':>16}")
    print(f"{'wall time, s':<28}{figures['wall_s']:>12}{PUBLISHED['wall_s']:>16}")
    if profiler:
        pstats.Stats(profiler).sort_stats("cumulative").print_stats(20)
    if args.json:
        args.json.write_text(json.dumps({"simulator": figures, "kueue": PUBLISHED}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
