"""Benchmark of the gang-job status path (not a test: prints figures).

``python scripts/bench_jobs.py [N]``: N pending Workloads (default 500) in one
LocalQueue of the emulator, then times, over real HTTP with the official client,
the calls one status sync makes per team (list Workloads, visibility API), and
``interpret_kueue`` per job.
"""

from __future__ import annotations

import datetime as dt
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.apiserver import EmulatorServer  # noqa: E402
from harness.sim import kueue_objects as ko  # noqa: E402
from queues.backends.kueue.jobs import interpret_kueue, render_kueue_job, workload_for_job  # noqa: E402
from queues.cluster import KubernetesCluster  # noqa: E402
from queues.jobs import JobSpec


def timed(label: str, fn, repeat: int = 5) -> None:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    print(f"{label:<55} {best * 1000:9.2f} ms (best of {repeat})")


def main(n: int = 500) -> None:
    with EmulatorServer() as server, tempfile.TemporaryDirectory() as tmp:
        cluster = KubernetesCluster(kubeconfig=server.write_kubeconfig(Path(tmp) / "config"))
        cluster.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "vision"}})
        cluster.apply({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
                       "metadata": {"name": "vision", "namespace": "vision"},
                       "spec": {"clusterQueue": "vision"}})
        jobs, start = [], time.perf_counter()
        for i in range(n):
            spec = JobSpec(namespace="vision", name=f"job-{i}", image="ghcr.io/a/b:1",
                           workers=2, gpus_per_worker=4, gpu_resource="nvidia.com/gpu",
                           flavor="h100", cpu_per_worker="8", memory_per_worker="64Gi",
                           local_queue="vision", job_label=str(i))
            job = cluster.apply(render_kueue_job(spec))
            ko.create_workload(cluster, job, priority=i % 7)
            jobs.append(job)
        print(f"setup: {n} jobs + Workloads in {time.perf_counter() - start:.1f} s")
        workloads: list = []
        timed(f"list_workloads ({n} items)",
              lambda: workloads.__setitem__(slice(None), cluster.list_workloads("vision")))
        timed(f"pending_workloads ({n} items, visibility API)",
              lambda: cluster.pending_workloads("vision", "vision"))
        now = dt.datetime.now(dt.UTC)

        def interpret_all() -> None:
            for job in jobs:
                interpret_kueue(job=job, workload=workload_for_job(workloads, job),
                                queue_position=0, now=now)

        timed(f"workload_for_job + interpret_kueue x {n}", interpret_all, repeat=3)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 500)
