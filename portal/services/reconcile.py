"""Make a cluster match the database: render, reconcile, record (the outbox's consumer).

:func:`cluster_reconcile` is what ``portal.reconcile_cluster`` runs. It reads
the cluster's ``spec_generation`` first, renders the desired objects from the
database, lets :func:`queues.reconcile.reconcile` converge the cluster, then
records every object's outcome in one transaction. ``applied_generation``
advances to the generation read at the start only when no object failed
transiently, so a lost task, a dead worker or an API outage leaves the
cluster lagging and the periodic resync re-drives it.

Two workers never reconcile one cluster at once: a per-cluster lock
(:mod:`portal.services.locks`; a PostgreSQL advisory lock) makes the second
one *skip* (:class:`~portal.services.locks.ClusterBusy`), and the holder
re-checks ``spec_generation`` when it releases, so the skipped change is
still applied (see :func:`cluster_reconcile`).
"""

from __future__ import annotations

import logging
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Exists, F, OuterRef, Q
from django.utils import timezone

from portal.models import Cluster, ManagedObject, Team
from portal.selectors.specs import cluster_specs, desired_objects
from portal.services.audit import audit_record
from portal.services.locks import ClusterBusy, cluster_reconcile_lock
from queues.errors import ClusterError
from queues.reconcile import FAILED, PRUNED, ReconcileResult, reconcile
from queues.specs import SpecError

log = logging.getLogger(__name__)

_MAX_ERROR = 4000


def cluster_port(*, cluster: Cluster):
    """The :class:`queues.cluster.KubernetesCluster` for ``cluster``.

    Kubeconfig from ``settings.KUBECONFIG`` (empty: in-cluster configuration);
    context ``cluster.kube_context``, else ``settings.KUBE_CONTEXT``, else the
    kubeconfig's current one; every request times out after
    ``settings.KUBE_CONNECT_TIMEOUT`` seconds to connect and
    ``settings.KUBE_REQUEST_TIMEOUT`` seconds to answer. Raises
    :class:`queues.errors.PermanentError` for an unusable configuration.
    """
    from queues.cluster import KubernetesCluster

    return KubernetesCluster(
        kubeconfig=settings.KUBECONFIG or None,
        context=cluster.kube_context or settings.KUBE_CONTEXT or None,
        timeout=(settings.KUBE_CONNECT_TIMEOUT, settings.KUBE_REQUEST_TIMEOUT),
    )


def cluster_reconcile(*, cluster_id: int, port=None, max_passes: int = 3
                      ) -> ReconcileResult | None:
    """Converge cluster ``cluster_id`` to the database and record what happened.

    ``port``: a cluster port to use instead of :func:`cluster_port` (the
    benchmark and the demo pass one they already hold). Returns the
    :class:`queues.reconcile.ReconcileResult` of the last pass, or ``None``
    when nothing could be attempted (cluster gone; specs that cannot render or
    an unusable kubeconfig: recorded in ``Cluster.last_error``). Never raises
    a cluster error; the caller checks ``result.retry_later``.

    One reconcile per cluster at a time (:func:`cluster_reconcile_lock`):
    raises :class:`~portal.services.locks.ClusterBusy` at once, without
    waiting, when another worker holds the cluster. The skip loses nothing:
    after releasing the lock the holder re-reads ``spec_generation`` and, if
    it moved on during its pass (the change whose reconcile was skipped), runs
    again, up to ``max_passes`` passes; past that, or after a transient
    failure, the periodic resync re-drives the cluster.
    """
    last: ReconcileResult | None = None
    for _ in range(max_passes):
        try:
            with cluster_reconcile_lock(cluster_id=cluster_id):
                run = _reconcile_once(cluster_id=cluster_id, port=port)
        except ClusterBusy:
            if last is None:
                raise
            break  # another worker took the lock after us: it re-checks when it releases
        if run is None:
            break
        last, generation, port = run
        if last.retry_later or not Cluster.objects.filter(
                pk=cluster_id, spec_generation__gt=generation).exists():
            break
    return last


def _reconcile_once(*, cluster_id: int, port):
    """One pass under the lock: ``(result, spec generation read, port)`` or ``None``."""
    cluster = Cluster.objects.filter(pk=cluster_id).first()
    if cluster is None:
        return None
    generation = cluster.spec_generation
    try:
        desired = desired_objects(cluster_specs(cluster=cluster))
        port = port or cluster_port(cluster=cluster)
    except (SpecError, ClusterError) as exc:
        log.warning("reconcile of cluster %s not attempted: %s", cluster.name, exc)
        Cluster.objects.filter(pk=cluster_id).update(last_error=str(exc)[:_MAX_ERROR],
                                                     last_reconciled_at=timezone.now())
        return None
    rows = {row.key: row for row in ManagedObject.objects.filter(cluster_id=cluster_id)}
    last_applied = {key: row.applied_hash for key, row in rows.items() if row.applied_hash}
    result = reconcile(port, desired, last_applied)
    _record(cluster_id=cluster_id, generation=generation, result=result)
    return result, generation, port


#: ManagedObject fields a reconcile pass may change (compared to skip unchanged rows):
#: every concrete field but the object's identity and the timestamp, so a field
#: added to the model is recorded without touching this list.
_RECORDED = tuple(
    f.attname for f in ManagedObject._meta.concrete_fields
    if f.attname not in {"id", "cluster_id", "api_version", "kind", "namespace", "name",
                         "updated_at"}
)


_GENERATION = _RECORDED.index("applied_generation")


def _recorded(row: ManagedObject) -> tuple:
    return tuple(getattr(row, name) for name in _RECORDED)


@transaction.atomic
def _record(*, cluster_id: int, generation: int, result: ReconcileResult) -> None:
    """Store the pass's outcome: one row per object, written only where it changed.

    New rows are bulk-created, changed rows bulk-updated, pruned rows deleted
    in one query: a no-op pass over thousands of objects writes no row.
    """
    cluster = Cluster.objects.select_for_update().get(pk=cluster_id)
    now = timezone.now()
    teams = dict(Team.objects.filter(cluster_id=cluster_id).values_list("slug", "pk"))
    rows = {row.key: row for row in ManagedObject.objects.filter(cluster_id=cluster_id)}
    seen = set()
    created, updated, confirmed, drifted, pruned = [], [], [], [], []
    for item in result.objects:
        if item.key[3] == "*":  # a failed list: no object to record it on
            continue
        seen.add(item.key)
        row = rows.get(item.key)
        if item.action == PRUNED:
            if row is not None:
                pruned.append(row.pk)
            continue
        before = None if row is None else _recorded(row)
        if row is None:
            api_version, kind, namespace, name = item.key
            row = ManagedObject(cluster_id=cluster_id, api_version=api_version, kind=kind,
                                namespace=namespace, name=name)
        row.team_id = teams.get(item.team) if item.team else None
        if item.desired is not None:
            row.desired = item.desired
        row.observed_state = item.observed
        if item.live_known:
            row.observed = item.live
        if item.applied:
            row.applied_hash = item.hash
            row.applied_generation = generation
            row.last_error = ""
        elif item.action == FAILED:
            row.last_error = item.error[:_MAX_ERROR]
        if item.drift:
            row.drift_count += 1
            row.last_drift_at = now
            drifted.append(row)
        if before is None:
            row.updated_at = now
            created.append(row)
        elif _recorded(row)[:_GENERATION] + _recorded(row)[_GENERATION + 1:] != (
                before[:_GENERATION] + before[_GENERATION + 1:]):
            row.updated_at = now
            updated.append(row)
        elif row.applied_generation != before[_GENERATION]:
            confirmed.append(row.pk)  # unchanged, now confirmed at this generation
    ManagedObject.objects.bulk_create(created, batch_size=500)
    ManagedObject.objects.bulk_update(updated, [*_RECORDED, "updated_at"], batch_size=500)
    for start in range(0, len(confirmed), 500):
        ManagedObject.objects.filter(pk__in=confirmed[start:start + 500]).update(
            applied_generation=generation, updated_at=now)
    for row in drifted:
        audit_record(actor=None, action="managed_object.drift_corrected", target=row,
                     team=row.team, before=None,
                     after={"kind": row.kind, "namespace": row.namespace, "name": row.name})
    # Pruned rows, and rows of objects neither desired nor found on the cluster any more.
    gone = pruned + [r.pk for k, r in rows.items() if k not in seen]
    if gone:
        ManagedObject.objects.filter(pk__in=gone).delete()
    failures = [f"{i.key[1]} {i.key[2] + '/' if i.key[2] else ''}{i.key[3]}: {i.error}"
                for i in result.failed]
    cluster.last_error = "\n".join(failures)[:_MAX_ERROR]
    cluster.last_reconciled_at = now
    if not result.retry_later and generation > cluster.applied_generation:
        cluster.applied_generation = generation
    cluster.save(update_fields=["last_error", "last_reconciled_at", "applied_generation"])


def clusters_to_resync(*, drift_check_seconds: float) -> list[int]:
    """Ids of clusters to reconcile now.

    Those whose ``applied_generation`` lags ``spec_generation`` (intent not
    yet converged); those with a ClusterQueue whose ``Active`` condition is
    not ``True`` yet: ``pending`` (just created: Kueue had not reported it
    when we applied) or ``not-active`` (e.g. Kueue's ``FlavorNotFound`` after
    the cluster refused a ResourceFlavor). Each resync then retries what
    failed and reads the condition again, so the portal shows the outcome
    within one resync period instead of one drift check; such a pass is
    reads only unless something is out of date. And those not reconciled for
    ``drift_check_seconds`` (a full pass that finds hand edits).
    """
    stale = timezone.now() - timedelta(seconds=drift_check_seconds)
    not_active = ManagedObject.objects.filter(
        cluster_id=OuterRef("pk"), kind="ClusterQueue",
        observed_state__state__in=["pending", "not-active"])
    return list(
        Cluster.objects.filter(
            Q(applied_generation__lt=F("spec_generation"))
            | Q(last_reconciled_at__isnull=True)
            | Q(last_reconciled_at__lt=stale)
            | Q(Exists(not_active))
        ).order_by("pk").values_list("pk", flat=True)
    )
