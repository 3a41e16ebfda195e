"""Reconcile benchmark: writes and wall time of a full resync, a no-op resync and a quota change.

Run with the project's venv (nothing else needed: it makes a throwaway
SQLite database in a temp folder and an in-process Kubernetes API emulator
spoken to over loopback HTTP by the official client, exactly as the worker
does)::

    .venv/bin/python scripts/bench_reconcile.py               # 1,000 teams
    .venv/bin/python scripts/bench_reconcile.py --teams 100 --profile

It prints one line per phase and a JSON summary:

* (a) **first full resync** of an empty cluster: every desired object is
  applied once (server-side apply), so writes == desired objects;
* (b) **no-op resync**: nothing changed, so **zero writes** (asserted);
* (c) **quota change of one team** (its nominal GPUs + 1): writes exactly
  the objects whose rendered manifest changed, all of that team (asserted).

"writes" are the emulator's write requests (create/update/patch/delete),
counted server-side. Teams are spread over ``--cohorts`` cohorts and
``--flavors`` GPU flavors; every team has a borrowing limit, so one team's
change never changes another team's ResourceQuota. ``--profile`` runs each
phase under pyinstrument and prints its call tree.

:func:`run_benchmark` is the part the test suite runs (at ~20 teams) on its
own database.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent

#: (name, device-plugin resource, GPU model) of the flavors, used in order.
FLAVORS = (
    ("h100", "nvidia.com/gpu", "NVIDIA-H100-80GB-HBM3"),
    ("a100", "nvidia.com/gpu", "NVIDIA-A100-SXM4-80GB"),
    ("a100-mig-1g", "nvidia.com/mig-1g.10gb", "NVIDIA-A100-SXM4-80GB"),
)


def build_world(*, teams: int, cohorts: int = 5, flavors: int = 3,
                cluster_name: str = "bench") -> int:
    """Create a cluster with ``flavors`` GPU flavors, ``cohorts`` cohorts and ``teams`` teams.

    Team ``i`` (slug ``team-0001``...) is in cohort ``i % cohorts`` and has
    one grant on flavor ``i % flavors``: 1..8 nominal GPUs, a borrowing limit
    of 4. Returns the cluster id. Needs Django set up (any database).
    """
    from decimal import Decimal

    from portal.models import Cluster, Cohort, GpuFlavor, QuotaGrant, Team

    cluster = Cluster.objects.create(name=cluster_name, backend="kueue")
    flavor_rows = [
        GpuFlavor.objects.create(
            cluster=cluster, name=name, gpu_resource=resource, gpu_model=model,
            physical_gpus=100_000, cpu_per_gpu="12", memory_per_gpu="96Gi",
            node_labels={"nvidia.com/gpu.product": model},
        )
        for name, resource, model in FLAVORS[:flavors]
    ]
    cohort_rows = [Cohort.objects.create(cluster=cluster, name=f"dept-{c}", weight=Decimal(1))
                   for c in range(cohorts)]
    team_rows = Team.objects.bulk_create([
        Team(slug=f"team-{i:04d}", name=f"Team {i}", cluster=cluster,
             cohort=cohort_rows[i % cohorts])
        for i in range(teams)
    ])
    QuotaGrant.objects.bulk_create([
        QuotaGrant(team=team, flavor=flavor_rows[i % flavors], nominal_gpus=1 + i % 8,
                   borrowing_limit_gpus=4)
        for i, team in enumerate(team_rows)
    ])
    return cluster.pk


def _timed_reconcile(cluster_id: int, port, server) -> tuple[float, int, object]:
    from portal.services.reconcile import cluster_reconcile

    server.counters.reset()
    started = time.perf_counter()
    result = cluster_reconcile(cluster_id=cluster_id, port=port)
    elapsed = time.perf_counter() - started
    if result is None or result.failed:
        failures = [] if result is None else [f.error for f in result.failed[:3]]
        raise RuntimeError(f"reconcile failed: {failures}")
    return elapsed, server.counters.writes, result


def run_benchmark(*, teams: int, server, port, cohorts: int = 5, flavors: int = 3,
                  profile: bool = False, echo=None) -> dict:
    """Build the world, then measure phases (a), (b), (c) (see the module doc).

    ``server``: a running :class:`harness.apiserver.EmulatorServer` (its
    counters give the writes); ``port``: a :class:`queues.cluster.KubernetesCluster`
    pointed at it. Returns ``{"teams", "objects", "full": {"seconds", "writes",
    "requests"}, "noop": {...}, "change": {..., "changed_objects": [...]}}``.
    Raises ``AssertionError`` if the no-op resync writes anything or the
    quota change writes other than exactly the changed objects.
    """
    from django.db import transaction

    from portal.models import QuotaGrant
    from portal.selectors.specs import cluster_specs, desired_objects
    from portal.services.outbox import cluster_spec_bump
    from queues.reconcile import key_of

    echo = echo or (lambda *_: None)
    cluster_id = build_world(teams=teams, cohorts=cohorts, flavors=flavors)
    figures: dict = {"teams": teams, "cohorts": cohorts, "flavors": flavors}

    def phase(name: str) -> dict:
        if profile:
            from pyinstrument import Profiler

            with Profiler() as profiler:
                seconds, writes, result = _timed_reconcile(cluster_id, port, server)
            echo(profiler.output_text(unicode=False, color=False))
        else:
            seconds, writes, result = _timed_reconcile(cluster_id, port, server)
        requests = server.counters.snapshot()["total"]
        figures[name] = {"seconds": round(seconds, 3), "writes": writes, "requests": requests}
        echo(f"{name:>6}: {seconds:8.2f} s  {writes:6d} writes  {requests:6d} requests  "
             f"({len(result.objects)} objects)")
        return figures[name]

    from portal.models import Cluster

    before = {key_of(o): o for o in desired_objects(cluster_specs(
        cluster=Cluster.objects.get(pk=cluster_id)))}
    figures["objects"] = len(before)
    full = phase("full")
    assert full["writes"] == len(before), (full["writes"], len(before))
    noop = phase("noop")
    assert noop["writes"] == 0, f"a no-op resync wrote {noop['writes']} objects"

    grant = QuotaGrant.objects.select_related("team").order_by("team__slug")[teams // 2]
    with transaction.atomic():
        QuotaGrant.objects.filter(pk=grant.pk).update(nominal_gpus=grant.nominal_gpus + 1)
        cluster_spec_bump(cluster_id=cluster_id)
    after = {key_of(o): o for o in desired_objects(cluster_specs(
        cluster=Cluster.objects.get(pk=cluster_id)))}
    changed = sorted(k for k in after if after[k] != before.get(k))
    change = phase("change")
    change["team"] = grant.team.slug
    change["changed_objects"] = [f"{kind} {ns + '/' if ns else ''}{name}"
                                 for _, kind, ns, name in changed]
    assert change["writes"] == len(changed), (change["writes"], changed)
    assert all(grant.team.slug in (ns, name) for _, _, ns, name in changed), changed
    return figures


def _setup_django(workdir: Path) -> None:
    os.environ["DATABASE_URL"] = f"sqlite:///{workdir / 'bench.sqlite3'}"
    os.environ["PORTAL_VAR_DIR"] = str(workdir)
    os.environ["REDIS_URL"] = ""
    os.environ.pop("CELERY_BROKER_URL", None)
    os.environ["DJANGO_SETTINGS_MODULE"] = "portal.settings"
    sys.path.insert(0, str(REPO_ROOT))
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def main(argv: list[str] | None = None) -> dict:
    """Command line entry point; see the module doc. Returns the figures."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--teams", type=int, default=1000)
    parser.add_argument("--cohorts", type=int, default=5)
    parser.add_argument("--flavors", type=int, default=3, choices=(1, 2, 3))
    parser.add_argument("--profile", action="store_true",
                        help="profile each phase with pyinstrument")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-reconcile-") as tmp:
        workdir = Path(tmp)
        _setup_django(workdir)
        from harness.apiserver import EmulatorServer
        from queues.cluster import KubernetesCluster

        with EmulatorServer() as server:
            kubeconfig = server.write_kubeconfig(workdir / "kubeconfig")
            port = KubernetesCluster(kubeconfig=kubeconfig)
            figures = run_benchmark(teams=args.teams, cohorts=args.cohorts,
                                    flavors=args.flavors, server=server, port=port,
                                    profile=args.profile, echo=print)
    print(json.dumps(figures, indent=2))
    return figures


if __name__ == "__main__":
    main()
