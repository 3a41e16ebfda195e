"""The metric families of ``GET /metrics``, computed at scrape time.

Every family is documented in its help text and in README.md > Metrics. Gauges come
from the database (a fixed number of aggregate queries whatever the number of rows);
counters and histograms of what workers did come from :mod:`portal.metrics.store`.
"""

from __future__ import annotations

import time

from django.db.models import Count, Min, Q, Sum
from django.utils import timezone
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
)
from prometheus_client.registry import Collector, CollectorRegistry

from portal.metrics import store

RECONCILE_OUTCOMES = ("ok", "failed_objects", "retry", "error", "skipped")


class PortalCollector(Collector):
    """The portal's metrics (a custom collector: nothing is kept between scrapes)."""

    def collect(self):
        from portal.models import Cluster, IdleFlag, Job, ManagedObject, QuotaRequest

        started = time.monotonic()
        now = timezone.now()
        clusters = list(Cluster.objects.order_by("name").values(
            "id", "name", "spec_generation", "applied_generation", "last_reconciled_at",
            "last_error"))
        names = {str(c["id"]): c["name"] for c in clusters}

        spec = GaugeMetricFamily("portal_cluster_spec_generation",
                                 "Generation of the cluster's desired state in the database "
                                 "(bumped by every change to reconcile).", labels=["cluster"])
        applied = GaugeMetricFamily("portal_cluster_applied_generation",
                                    "spec_generation the reconciler last converged.",
                                    labels=["cluster"])
        lag = GaugeMetricFamily("portal_reconcile_lag_generations",
                                "spec_generation - applied_generation: changes not yet on the "
                                "cluster (0 when converged).", labels=["cluster"])
        last = GaugeMetricFamily("portal_cluster_last_reconcile_timestamp_seconds",
                                 "Unix time of the cluster's last completed reconcile.",
                                 labels=["cluster"])
        error = GaugeMetricFamily("portal_cluster_reconcile_error",
                                  "1 when the cluster's last reconcile recorded an error.",
                                  labels=["cluster"])
        for c in clusters:
            spec.add_metric([c["name"]], c["spec_generation"])
            applied.add_metric([c["name"]], c["applied_generation"])
            lag.add_metric([c["name"]], max(0, c["spec_generation"] - c["applied_generation"]))
            if c["last_reconciled_at"] is not None:
                last.add_metric([c["name"]], c["last_reconciled_at"].timestamp())
            error.add_metric([c["name"]], 1 if c["last_error"] else 0)
        yield from (spec, applied, lag, last, error)

        objects = GaugeMetricFamily("portal_managed_objects",
                                    "Objects the portal manages on the cluster, by state "
                                    "(failed: the API refused the last apply).",
                                    labels=["cluster", "state"])
        rows = (ManagedObject.objects.values("cluster__name")
                .annotate(total=Count("id"), failed=Count("id", filter=~Q(last_error=""))))
        for row in rows:
            objects.add_metric([row["cluster__name"], "failed"], row["failed"])
            objects.add_metric([row["cluster__name"], "ok"], row["total"] - row["failed"])
        yield objects

        jobs = GaugeMetricFamily("portal_jobs", "Jobs by cluster and phase (every phase, "
                                 "zeros included).", labels=["cluster", "phase"])
        counts = {(r["flavor__cluster__name"], r["phase"]): r["n"] for r in
                  Job.objects.values("flavor__cluster__name", "phase").annotate(n=Count("id"))}
        for c in clusters:
            for phase in Job.Phase.values:
                jobs.add_metric([c["name"], phase], counts.get((c["name"], phase), 0))
        yield jobs

        pending = GaugeMetricFamily("portal_quota_requests_pending",
                                    "Quota requests waiting for a staff review.",
                                    labels=["cluster"])
        oldest = GaugeMetricFamily("portal_quota_request_oldest_pending_age_seconds",
                                   "Age of the oldest pending quota request (absent when "
                                   "none waits).", labels=["cluster"])
        waiting = {r["flavor__cluster__name"]: r for r in
                   QuotaRequest.objects.filter(state=QuotaRequest.State.PENDING)
                   .values("flavor__cluster__name")
                   .annotate(n=Count("id"), first=Min("created_at"))}
        for c in clusters:
            row = waiting.get(c["name"])
            pending.add_metric([c["name"]], row["n"] if row else 0)
            if row:
                oldest.add_metric([c["name"]], (now - row["first"]).total_seconds())
        yield from (pending, oldest)

        flags = GaugeMetricFamily("portal_idle_flags",
                                  "Live idle-GPU flags by state (open: owner notified; "
                                  "snoozed: justified by the owner).", labels=["cluster", "state"])
        idle_gpus = GaugeMetricFamily("portal_idle_flagged_gpus",
                                      "GPUs held by jobs with a live idle flag.",
                                      labels=["cluster"])
        live = {(r["job__flavor__cluster__name"], r["state"]): r for r in
                IdleFlag.objects.filter(state__in=IdleFlag.LIVE_STATES)
                .values("job__flavor__cluster__name", "state")
                .annotate(n=Count("id"), gpus=Sum("gpus"))}
        for c in clusters:
            total = 0.0
            for state in IdleFlag.LIVE_STATES:
                row = live.get((c["name"], state))
                flags.add_metric([c["name"], str(state)], row["n"] if row else 0)
                total += (row["gpus"] or 0.0) if row else 0.0
            idle_gpus.add_metric([c["name"]], total)
        yield from (flags, idle_gpus)

        yield from self._worker_side(store.read(), names)

        scrape = GaugeMetricFamily("portal_metrics_scrape_duration_seconds",
                                   "Seconds this scrape took to compute.")
        scrape.add_metric([], time.monotonic() - started)
        yield scrape

    @staticmethod
    def _worker_side(snapshot: store.Snapshot, names: dict[str, str]):
        up = GaugeMetricFamily("portal_metrics_store_up",
                               "1 when the workers' metrics store (Redis) was read.")
        up.add_metric([], 1 if snapshot.up else 0)
        yield up

        tasks = CounterMetricFamily("portal_celery_tasks",
                                    "Finished Celery task runs by task and outcome (success, "
                                    "failure, retry, revoked).", labels=["task", "outcome"])
        for (task, outcome), n in sorted(snapshot.tasks.items()):
            tasks.add_metric([task, outcome], n)
        yield tasks

        durations = HistogramMetricFamily("portal_celery_task_duration_seconds",
                                          "Run time of Celery tasks.", labels=["task"])
        for task, hist in sorted(snapshot.task_durations.items()):
            durations.add_metric([task], hist.buckets, hist.sum)
        yield durations

        # Clusters deleted since are left out (their ids name nothing any more).
        runs = CounterMetricFamily("portal_reconcile_runs",
                                   "Reconcile task runs by cluster and outcome (ok, "
                                   "failed_objects, retry, error, skipped).",
                                   labels=["cluster", "outcome"])
        for (cluster_id, outcome), n in sorted(snapshot.reconcile.items()):
            if cluster_id in names:
                runs.add_metric([names[cluster_id], outcome], n)
        yield runs

        failed = CounterMetricFamily("portal_reconcile_failed_objects",
                                     "Objects a reconcile run could not apply (permanent "
                                     "refusals), summed over runs.", labels=["cluster"])
        writes = CounterMetricFamily("portal_reconcile_writes",
                                     "Writes (applies and deletes) sent by reconcile runs.",
                                     labels=["cluster"])
        for source, family in ((snapshot.reconcile_failed_objects, failed),
                               (snapshot.reconcile_writes, writes)):
            for cluster_id, n in sorted(source.items()):
                if cluster_id in names:
                    family.add_metric([names[cluster_id]], n)
        yield from (failed, writes)

        reconcile = HistogramMetricFamily("portal_reconcile_duration_seconds",
                                          "Run time of reconcile task runs (skipped runs left "
                                          "out).", labels=["cluster"])
        for cluster_id, hist in sorted(snapshot.reconcile_durations.items()):
            if cluster_id in names:
                reconcile.add_metric([names[cluster_id]], hist.buckets, hist.sum)
        yield reconcile


def registry() -> CollectorRegistry:
    """A registry holding only :class:`PortalCollector` (built per scrape: cheap)."""
    reg = CollectorRegistry(auto_describe=False)
    reg.register(PortalCollector())
    return reg
