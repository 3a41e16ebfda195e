#!/usr/bin/env python3
"""Benchmark of the what-if in the quota preview (not a test: prints figures).

``DATABASE_URL=postgres://... python scripts/bench_whatif.py [--jobs 2000] [--repeat 5]``

Creates a throwaway test database (``test_<name>``, dropped at the end) holding a
cluster like the demo's (h100: 64 GPUs, a100: 32 GPUs, a100-mig-1g: 56 MIG
instances; 8 devices per node; two cohorts, six teams) and ``--jobs`` jobs
submitted over the last 6.5 days by a seeded generator (sizes 1-16 GPUs, run
times 5 min - 6 h, about 80 % of the GPUs busy on average, two priorities).
The request: team-a's h100 nominal 16 -> 24. Then times, best and median of
``--repeat`` runs:

* ``recent_demand``: the one query reading the window and the Demand rows;
* the two simulator runs alone (``queues.whatif.what_if``), Kueue and Volcano;
* the whole API preview (``quota_request_preview``) cold (cache cleared) and
  warm (cached by request id, spec generation and newest job id);

and the number of SQL queries of the preview, cold and warm.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")

import django  # noqa: E402

django.setup()

from django.core.cache import cache  # noqa: E402
from django.db import connection  # noqa: E402
from django.test.utils import (  # noqa: E402
    CaptureQueriesContext,
    setup_databases,
    setup_test_environment,
    teardown_databases,
)
from django.utils import timezone  # noqa: E402

from portal.models import (  # noqa: E402
    Cluster,
    Cohort,
    GpuFlavor,
    Job,
    PriorityClass,
    QuotaGrant,
    QuotaRequest,
    Team,
)
from portal.selectors.quota import quota_request_preview  # noqa: E402
from portal.selectors.specs import cluster_specs  # noqa: E402
from portal.selectors.whatif import recent_demand, sim_cluster  # noqa: E402
from queues import whatif  # noqa: E402

#: team -> cohort, {flavor: nominal GPUs}
TEAMS = {
    "team-a": ("vision", {"h100": 16, "a100": 8}),
    "team-b": ("vision", {"h100": 16, "a100-mig-1g": 14}),
    "team-c": ("vision", {"h100": 8, "a100": 8}),
    "team-d": ("language", {"h100": 16, "a100-mig-1g": 28}),
    "team-e": ("language", {"h100": 8, "a100": 8}),
    "team-f": ("language", {"a100": 8, "a100-mig-1g": 14}),
}
FLAVORS = {  # name -> (resource, devices, devices per node)
    "h100": ("nvidia.com/gpu", 64, 8),
    "a100": ("nvidia.com/gpu", 32, 8),
    "a100-mig-1g": ("nvidia.com/mig-1g.10gb", 56, 56),
}


def build_world(jobs: int, seed: int = 42) -> QuotaRequest:
    """The cluster rows, ``jobs`` jobs and the pending request; returns the request."""
    cluster = Cluster.objects.create(name="bench")
    flavors = {
        name: GpuFlavor.objects.create(cluster=cluster, name=name, gpu_resource=resource,
                                       gpu_model="A100" if "a100" in name else "H100",
                                       physical_gpus=devices, gpus_per_node=per_node)
        for name, (resource, devices, per_node) in FLAVORS.items()
    }
    cohorts = {name: Cohort.objects.create(cluster=cluster, name=name)
               for name in ("vision", "language")}
    teams = {}
    for slug, (cohort, quotas) in TEAMS.items():
        teams[slug] = Team.objects.create(cluster=cluster, slug=slug, name=slug,
                                          cohort=cohorts[cohort])
        for flavor, nominal in quotas.items():
            QuotaGrant.objects.create(team=teams[slug], flavor=flavors[flavor],
                                      nominal_gpus=nominal)
    low = PriorityClass.objects.create(name="bench-low", value=100)
    high = PriorityClass.objects.create(name="bench-high", value=1000)
    rng = random.Random(seed)  # noqa: S311 - a seeded workload, not security
    now = timezone.now()
    start = now - timedelta(days=6.5)
    span = (now - start).total_seconds()
    rows = []
    for i in range(jobs):
        slug = rng.choice(sorted(teams))
        flavor = rng.choice(sorted(TEAMS[slug][1]))
        gpus = rng.choice([1, 1, 2, 2, 4, 4, 8]) if flavor != "a100-mig-1g" else rng.choice(
            [1, 2, 4])
        workers = rng.choice([1, 1, 1, 2]) if gpus == 8 else 1
        submitted = start + timedelta(seconds=span * i / jobs + rng.uniform(0, 60))
        run = min(6 * 3600, max(300, rng.lognormvariate(8.2, 0.9)))
        rows.append(Job(
            team=teams[slug], name=f"job-{i}", image="ghcr.io/acme/train:1",
            flavor=flavors[flavor], workers=workers, gpus_per_worker=gpus,
            priority_class=high if rng.random() < 0.15 else low,
            phase=Job.Phase.SUCCEEDED, max_runtime_seconds=8 * 3600,
        ))
        rows[-1]._times = (submitted, submitted + timedelta(seconds=rng.uniform(0, 600)), run)
    Job.objects.bulk_create(rows, batch_size=500)
    for job in rows:  # submitted_at is auto_now_add: set the history afterwards
        submitted, started, run = job._times
        job.submitted_at, job.started_at = submitted, started
        job.finished_at = started + timedelta(seconds=run)
    Job.objects.bulk_update(rows, ["submitted_at", "started_at", "finished_at"], batch_size=500)
    return QuotaRequest.objects.create(team=teams["team-a"], flavor=flavors["h100"],
                                       nominal_gpus=24, justification="bench")


def timed(label: str, fn, repeat: int) -> object:
    samples, result = [], None
    for _ in range(repeat):
        begin = time.perf_counter()
        result = fn()
        samples.append(time.perf_counter() - begin)
    print(f"{label:<52} best {min(samples) * 1000:8.1f} ms   median "
          f"{statistics.median(samples) * 1000:8.1f} ms")
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    setup_test_environment()
    old = setup_databases(verbosity=0, interactive=False)
    try:
        request = build_world(args.jobs)
        request = QuotaRequest.objects.select_related("team", "team__cluster", "flavor").get(
            pk=request.pk)
        cluster = request.team.cluster
        print(f"{args.jobs} jobs over 6.5 days, 6 teams, 3 flavors; request: team-a h100 "
              f"16 -> 24 nominal")
        window = timed("recent_demand (1 query)", lambda: recent_demand(cluster=cluster),
                       args.repeat)
        overrides = {(request.team_id, request.flavor_id): (24, None, None)}
        devices = dict(GpuFlavor.objects.filter(cluster=cluster)
                       .values_list("name", "gpus_per_node"))
        for backend in ("kueue", "volcano"):
            Cluster.objects.filter(pk=cluster.pk).update(backend=backend)
            cluster.refresh_from_db()
            before = sim_cluster(specs=cluster_specs(cluster=cluster), devices_per_node=devices)
            after = sim_cluster(specs=cluster_specs(cluster=cluster, overrides=overrides),
                                devices_per_node=devices)
            result = timed(f"two simulator runs, {backend}",
                           lambda b=before, a=after: whatif.what_if(
                               before=b, after=a, demand=window.demand), args.repeat)
            for sentence in result.sentences:
                print(f"    {sentence}")
        Cluster.objects.filter(pk=cluster.pk).update(backend="kueue")
        request.team.cluster.refresh_from_db()

        def cold():
            cache.clear()
            return quota_request_preview(request=request)

        timed("preview, cold (kueue; simulation + queries)", cold, args.repeat)
        timed("preview, warm (cached)", lambda: quota_request_preview(request=request),
              args.repeat)
        cache.clear()
        with CaptureQueriesContext(connection) as cold_queries:
            quota_request_preview(request=request)
        with CaptureQueriesContext(connection) as warm_queries:
            quota_request_preview(request=request)
        print(f"SQL queries of the preview: cold {len(cold_queries)}, warm {len(warm_queries)}")
    finally:
        teardown_databases(old, verbosity=0)


if __name__ == "__main__":
    main()
