"""Read paths for quota: sums, the approval preview, request lists."""

import yaml
from django.db.models import QuerySet, Sum

from portal import access
from portal.models import GpuFlavor, QuotaGrant, QuotaRequest, Team
from portal.selectors.specs import ClusterSpecs, cluster_specs, desired_objects
from portal.selectors.whatif import quota_request_what_if
from queues.render import amounts, labels
from queues.specs import SpecError

#: The grant fields an audit event records (before/after).
GRANT_FIELDS = ("nominal_gpus", "borrowing_limit_gpus", "lending_limit_gpus")


def grant_snapshot(grant: QuotaGrant | None) -> dict | None:
    """JSON-ready ``{nominal_gpus, borrowing_limit_gpus, lending_limit_gpus}`` or ``None``."""
    if grant is None:
        return None
    return {name: getattr(grant, name) for name in GRANT_FIELDS}


def flavor_nominal_sum(*, flavor: GpuFlavor, replacing: tuple[int, int] | None = None) -> int:
    """Sum of nominal GPUs granted on ``flavor`` (one query).

    ``replacing=(team_id, nominal)`` gives the sum as it would be with that
    team's grant set to ``nominal`` GPUs.
    """
    grants = QuotaGrant.objects.filter(flavor=flavor)
    if replacing is not None:
        grants = grants.exclude(team_id=replacing[0])
    total = grants.aggregate(total=Sum("nominal_gpus"))["total"] or 0
    return total + (replacing[1] if replacing is not None else 0)


def max_admissible_gpus(
    *, team: Team, flavor: GpuFlavor, nominal: int, borrowing_limit: int | None,
    specs: ClusterSpecs,
) -> int:
    """The most GPUs of ``flavor`` the team's queue could ever be admitted with
    (:func:`queues.render.amounts.admissible_gpus`). ``specs``: the cluster as it is
    (or would be), from ``cluster_specs``, built once by the caller.
    """
    return amounts.admissible_gpus(
        team=team.slug, cohort=team.cohort.name if team.cohort_id else None,
        flavor=flavor.name, nominal=nominal, borrowing_limit=borrowing_limit,
        teams=specs.teams, cohorts=specs.cohorts)


def quota_request_preview(*, request: QuotaRequest, what_if: bool = True) -> dict:
    """What approving ``request`` would do, for the reviewer.

    Returns ``{capacity_gpus, nominal_sum_gpus, nominal_sum_after_gpus,
    overcommit_after: bool, current: {nominal_gpus, borrowing_limit_gpus,
    lending_limit_gpus}|None, requested: {...}, max_admissible_gpus_now,
    max_admissible_gpus, manifests: [dict], what_if: dict|None}``: GPU counts of
    the request's flavor (capacity in physical GPUs), the exact manifests of the
    team's objects and of the shared objects that approval would apply, and the
    what-if of :func:`portal.selectors.whatif.quota_request_what_if` (recent
    demand replayed with and without the request; ``None`` when ``what_if`` is
    false).
    """
    team, flavor = request.team, request.flavor
    grant = QuotaGrant.objects.filter(team=team, flavor=flavor).first()
    current = grant_snapshot(grant)
    requested = (request.nominal_gpus, request.borrowing_limit_gpus, request.lending_limit_gpus)
    overrides = {(team.pk, flavor.pk): requested}
    after_sum = flavor_nominal_sum(flavor=flavor, replacing=(team.pk, request.nominal_gpus))
    after = cluster_specs(cluster=team.cluster, overrides=overrides)
    before = cluster_specs(cluster=team.cluster)
    team_label = labels.team_labels(team.slug)
    manifests = [
        obj for obj in desired_objects(after)
        if all(obj["metadata"].get("labels", {}).get(k) == v for k, v in team_label.items())
        or obj["kind"] in ("ResourceFlavor", "Cohort")
        and _mentions(obj, flavor.name, team.cohort.name if team.cohort else None)
    ]
    return {
        "capacity_gpus": flavor.physical_gpus,
        "nominal_sum_gpus": flavor_nominal_sum(flavor=flavor),
        "nominal_sum_after_gpus": after_sum,
        "overcommit_after": after_sum > flavor.physical_gpus,
        "current": current,
        "requested": dict(zip(
            ("nominal_gpus", "borrowing_limit_gpus", "lending_limit_gpus"), requested,
            strict=True,
        )),
        "max_admissible_gpus_now": max_admissible_gpus(
            team=team, flavor=flavor, nominal=current["nominal_gpus"] if current else 0,
            borrowing_limit=current["borrowing_limit_gpus"] if current else None,
            specs=before,
        ),
        "max_admissible_gpus": max_admissible_gpus(
            team=team, flavor=flavor, nominal=request.nominal_gpus,
            borrowing_limit=request.borrowing_limit_gpus, specs=after,
        ),
        "manifests": manifests,
        "what_if": quota_request_what_if(request=request, before=before, after=after)
        if what_if else None,
    }


def _mentions(obj: dict, flavor: str, cohort: str | None) -> bool:
    name = obj["metadata"]["name"]
    return (obj["kind"] == "ResourceFlavor" and name == flavor) or (
        obj["kind"] == "Cohort" and name == cohort
    )


def quota_requests_visible(*, user, team: str | None = None, state: str | None = None
                           ) -> QuerySet[QuotaRequest]:
    """Requests ``user`` may see, optionally filtered by team slug and state (one query)."""
    qs = QuotaRequest.objects.select_related("team", "flavor", "requested_by", "reviewer")
    if not getattr(user, "is_authenticated", False):
        return qs.none()
    if not access.is_staff(user):
        qs = qs.filter(team__memberships__user=user)
    if team:
        qs = qs.filter(team__slug=team)
    if state:
        qs = qs.filter(state=state)
    return qs.order_by("-created_at", "-id")


def pending_requests() -> QuerySet[QuotaRequest]:
    """The staff review queue: pending requests, oldest first."""
    return (
        QuotaRequest.objects.filter(state=QuotaRequest.State.PENDING)
        .select_related("team", "flavor", "requested_by", "team__cohort")
        .order_by("created_at", "id")
    )



def pending_request_count() -> int:
    """How many requests wait for review (one query; the staff nav badge)."""
    return QuotaRequest.objects.filter(state=QuotaRequest.State.PENDING).count()


def manifests_yaml(manifests: list[dict]) -> str:
    """Manifests as one multi-document YAML text, keys in renderer order."""
    return "---\n".join(yaml.safe_dump(obj, sort_keys=False) for obj in manifests)


def quota_request_review(*, request_id: int) -> dict | None:
    """The staff review page of request ``request_id``, or ``None`` if there is none.

    Returns ``{quota_request, preview, manifests_yaml, preview_error}``: the preview
    (see :func:`quota_request_preview`) only while the request is pending;
    ``preview_error`` names why the cluster's rows could not be rendered.
    """
    request = (
        QuotaRequest.objects.select_related(
            "team", "team__cluster", "team__cohort", "flavor", "requested_by", "reviewer"
        )
        .filter(pk=request_id)
        .first()
    )
    if request is None:
        return None
    preview, text, error = None, "", ""
    if request.state == QuotaRequest.State.PENDING:
        try:
            preview = quota_request_preview(request=request)
        except SpecError as exc:
            error = str(exc)
        else:
            text = manifests_yaml(preview["manifests"])
    return {"quota_request": request, "preview": preview, "manifests_yaml": text,
            "preview_error": error}
