"""Read paths for "what the cluster holds": object states in words, YAML and drift.

The reconciler records each object it manages in :class:`ManagedObject`
(``observed_state``, ``last_error``, ``applied_generation``, ``observed``);
these selectors turn rows into what the pages show, in a fixed number of
queries however many objects a team or cluster has.

States, in the order they win:

* ``pending`` - no row yet (never reconciled);
* ``failed`` - the last attempt failed: ``failed: <the API's message>``;
* ``pending`` - the cluster's ``spec_generation`` moved past the row's
  ``applied_generation`` (an approved change the worker has not applied
  yet), or the controller has not reported the object yet (a ClusterQueue
  without an ``Active`` condition);
* ``not-active`` - ``not active: <reason> (<message>)`` (a ClusterQueue
  whose ``Active`` condition is ``False``, e.g. a missing flavor);
* ``retained`` - no longer desired but kept (a team namespace);
* ``applied``.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass

import yaml
from django.db.models import Count, Q, QuerySet, Sum

from portal.backends import backend_for
from portal.models import AuditEvent, Cluster, ManagedObject, QuotaRequest, Team
from queues.backends import MANAGED_KINDS
from queues.reconcile import Key, is_subset
from queues.specs import SpecError, TeamQueueSpec

#: The audit action the reconciler records when it restores a hand-edited object.
DRIFT_ACTION = "managed_object.drift_corrected"

#: Badge class per state (templates).
BADGES = {"applied": "ok", "failed": "bad", "not-active": "bad", "pending": "warn",
          "retained": ""}

_KIND_ORDER = {kind: index for index, (_, kind) in enumerate(MANAGED_KINDS)}


@dataclass(frozen=True)
class ObjectState:
    """One managed object as a page shows it.

    ``key`` is ``(apiVersion, kind, namespace or "", name)``; ``state`` one of
    ``applied``, ``not-active``, ``failed``, ``pending``, ``retained``;
    ``text`` the state in words (``"not active: FlavorNotFound (...)"``);
    ``row`` the :class:`ManagedObject` (``None`` before the first reconcile).
    """

    key: Key
    state: str
    text: str
    row: ManagedObject | None = None

    @property
    def api_version(self) -> str:
        return self.key[0]

    @property
    def kind(self) -> str:
        return self.key[1]

    @property
    def namespace(self) -> str:
        return self.key[2]

    @property
    def name(self) -> str:
        return self.key[3]

    @property
    def badge(self) -> str:
        """CSS badge class of :attr:`state`."""
        return BADGES.get(self.state, "")


def _with_detail(head: str, reason: str, message: str) -> str:
    if reason and message:
        return f"{head}: {reason} ({message})"
    if reason or message:
        return f"{head}: {reason or message}"
    return head


def object_state(*, row: ManagedObject | None, spec_generation: int) -> tuple[str, str]:
    """``(state, text)`` of one object; see the module doc for the rules.

    ``row``: the object's :class:`ManagedObject` or ``None`` when the
    reconciler has not recorded it yet; ``spec_generation``: its cluster's
    current ``spec_generation``. No queries.
    """
    if row is None:
        return "pending", "pending: not reconciled yet"
    observed = row.observed_state or {}
    state = observed.get("state") or ""
    if state == "failed":
        return "failed", f"failed: {row.last_error or observed.get('message') or 'unknown error'}"
    if state == "retained":
        return "retained", _with_detail("retained", "", observed.get("message", ""))
    if row.applied_generation < spec_generation:
        return "pending", (f"pending: approved change not applied yet (generation "
                           f"{row.applied_generation} of {spec_generation})")
    if state == "not-active":
        return "not-active", _with_detail("not active", observed.get("reason", ""),
                                          observed.get("message", ""))
    if state == "pending":
        return "pending", _with_detail("pending", observed.get("reason", ""),
                                       observed.get("message", ""))
    return "applied", "applied"


def _state_of(row: ManagedObject | None, key: Key, spec_generation: int) -> ObjectState:
    state, text = object_state(row=row, spec_generation=spec_generation)
    return ObjectState(key=key, state=state, text=text, row=row)


def _sort_key(key: Key) -> tuple:
    return (_KIND_ORDER.get(key[1], len(_KIND_ORDER)), key[1], key[2], key[3])


def team_object_keys(team: Team) -> list[Key]:
    """The keys of the objects every team owns, in apply order, named as the renderers
    name them (the backend's ``team_object_keys``: on Kueue ``[Namespace,
    ResourceQuota, ClusterQueue, LocalQueue]``). Empty for a team whose slug
    cannot be rendered, and on a backend that lists only the rows the reconciler
    recorded (Volcano). ``team.cluster`` must be loaded; no queries.
    """
    try:
        spec = TeamQueueSpec(slug=team.slug, display_name=team.name or team.slug)
    except SpecError:
        return []
    return backend_for(team.cluster).team_object_keys(spec)


def team_cluster_state(*, team: Team) -> list[ObjectState]:
    """Every managed object of ``team`` with its state, in apply order (one query).

    ``team`` must come with its ``cluster`` loaded (``select_related``). The
    team's own objects (:func:`team_object_keys`) are always listed, as
    ``pending`` until the reconciler records them; any other row labelled
    with the team is listed too.
    """
    rows = {row.key: row for row in ManagedObject.objects.filter(
        cluster_id=team.cluster_id, team_id=team.pk)}
    keys = set(rows) | set(team_object_keys(team))
    generation = team.cluster.spec_generation
    return [_state_of(rows.get(key), key, generation) for key in sorted(keys, key=_sort_key)]


def request_cluster_state(*, request: QuotaRequest) -> list[ObjectState]:
    """The objects approving ``request`` changes, with their state (one query).

    The team's Namespace, ResourceQuota, ClusterQueue and LocalQueue
    (:func:`team_object_keys`), matched by key whatever their team label.
    ``request`` must come with ``team__cluster`` loaded.
    """
    team = request.team
    keys = team_object_keys(team)
    match = Q(pk__in=[])
    for api_version, kind, namespace, name in keys:
        match |= Q(api_version=api_version, kind=kind, namespace=namespace, name=name)
    rows = {row.key: row for row in ManagedObject.objects.filter(match,
                                                                  cluster_id=team.cluster_id)}
    generation = team.cluster.spec_generation
    return [_state_of(rows.get(key), key, generation) for key in keys]


# --- staff ---------------------------------------------------------------------------


def clusters_overview() -> QuerySet[Cluster]:
    """Every cluster with its object counts (one query).

    Each cluster carries ``object_count``, ``failed_count`` (objects whose
    last attempt failed), ``drift_total`` (sum of ``drift_count``).
    """
    return Cluster.objects.annotate(
        object_count=Count("managed_objects"),
        failed_count=Count("managed_objects",
                           filter=Q(managed_objects__observed_state__state="failed")),
        drift_total=Sum("managed_objects__drift_count", default=0),
    ).order_by("name")


@dataclass(frozen=True)
class ClusterObjectsPage:
    """The staff page of one cluster's managed objects.

    ``objects``: every :class:`ObjectState`, in apply order; ``counts``:
    ``{state: n}``; ``lagging``: ``applied_generation < spec_generation``.
    """

    cluster: Cluster
    objects: list[ObjectState]
    counts: dict[str, int]

    @property
    def lagging(self) -> bool:
        return self.cluster.applied_generation < self.cluster.spec_generation


def cluster_objects_page(*, name: str) -> ClusterObjectsPage | None:
    """Cluster ``name`` and every object the portal manages on it (two queries).

    ``None`` when there is no such cluster.
    """
    cluster = Cluster.objects.filter(name=name).first()
    if cluster is None:
        return None
    rows = ManagedObject.objects.filter(cluster=cluster).select_related("team")
    objects = sorted((_state_of(row, row.key, cluster.spec_generation) for row in rows),
                     key=lambda o: _sort_key(o.key))
    counts: dict[str, int] = {}
    for obj in objects:
        counts[obj.state] = counts.get(obj.state, 0) + 1
    return ClusterObjectsPage(cluster=cluster, objects=objects, counts=counts)


def to_yaml(obj: dict | None) -> str:
    """``obj`` as YAML with sorted keys ("" for ``None``).

    Keys are sorted so the desired and observed texts line up for a diff
    (PostgreSQL's ``jsonb`` does not keep key order anyway).
    """
    if obj is None:
        return ""
    return yaml.safe_dump(obj, sort_keys=True, default_flow_style=False)


@dataclass(frozen=True)
class ObjectDetail:
    """The staff page of one managed object.

    ``desired_yaml`` / ``observed_yaml``: the manifest last rendered and the
    object as last read from the cluster (server bookkeeping stripped);
    ``diff``: a unified diff from desired to observed (lines starting with
    ``+`` are on the cluster only: server defaults, status, or a hand edit
    not corrected yet); ``in_sync``: every field we set has our value on the
    cluster (:func:`queues.reconcile.is_subset`); ``drift_events``: the
    :class:`AuditEvent` rows of corrected drift, newest first.
    """

    object: ObjectState
    desired_yaml: str
    observed_yaml: str
    diff: str
    in_sync: bool | None
    drift_events: list[AuditEvent]

    @property
    def cluster(self) -> Cluster:
        return self.object.row.cluster


def managed_object_detail(*, cluster_name: str, pk: int) -> ObjectDetail | None:
    """Object ``pk`` of cluster ``cluster_name`` with YAML, diff and drift events (two queries).

    ``None`` when there is no such object on that cluster.
    """
    row = (ManagedObject.objects.select_related("cluster", "team")
           .filter(pk=pk, cluster__name=cluster_name).first())
    if row is None:
        return None
    desired_text, observed_text = to_yaml(row.desired), to_yaml(row.observed)
    diff = "".join(difflib.unified_diff(
        desired_text.splitlines(keepends=True), observed_text.splitlines(keepends=True),
        fromfile="desired", tofile="observed (cluster)",
    ))
    in_sync = None
    if row.desired is not None:
        in_sync = row.observed is not None and is_subset(row.desired, row.observed)
    events = list(AuditEvent.objects.filter(
        action=DRIFT_ACTION, target_type=ManagedObject._meta.label_lower, target_id=str(row.pk),
    ).order_by("-at", "-id"))
    return ObjectDetail(
        object=_state_of(row, row.key, row.cluster.spec_generation),
        desired_yaml=desired_text, observed_yaml=observed_text, diff=diff, in_sync=in_sync,
        drift_events=events,
    )


__all__ = [
    "DRIFT_ACTION",
    "ClusterObjectsPage",
    "ObjectDetail",
    "ObjectState",
    "cluster_objects_page",
    "clusters_overview",
    "managed_object_detail",
    "object_state",
    "request_cluster_state",
    "team_cluster_state",
    "team_object_keys",
    "to_yaml",
]
