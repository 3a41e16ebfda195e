"""The portal's own metrics, served at ``GET /metrics`` (see :mod:`portal.views.metrics`).

Two sources, read at scrape time by :class:`portal.metrics.collector.PortalCollector`:

* the database (any web process answers the same): reconcile lag per cluster (spec vs
  applied generation), jobs per phase, pending quota requests, idle-GPU flags;
* what the Celery workers did, which no web process sees: task outcomes and durations,
  reconcile runs, durations and failed objects. Workers add these to counters and
  histogram buckets in Redis (:mod:`portal.metrics.store`, written by the Celery signal
  handlers of :mod:`portal.metrics.signals`), so one scrape of ``/metrics`` covers every
  worker pod, and a restarted worker loses nothing.
"""
