"""Quota requests and grants: create, approve, reject, withdraw, expire."""

from datetime import datetime

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.utils import timezone

from portal import access
from portal.models import GpuFlavor, QuotaGrant, QuotaRequest, Team
from portal.selectors.quota import flavor_nominal_sum, grant_snapshot
from portal.services.audit import audit_record
from portal.services.fields import whole_count
from portal.services.outbox import cluster_spec_bump, reconcile_enqueue
from queues import specs
from queues.specs import SpecError


def quota_values_check(
    *, team: Team, flavor: GpuFlavor, nominal_gpus, borrowing_limit_gpus, lending_limit_gpus
) -> tuple[int, int | None, int | None]:
    """Validate quota numbers for ``team`` on ``flavor``; return them as ints.

    Rules: whole, non-negative GPU counts; limits (``None`` = no limit) only when
    the team is in a cohort (Kueue refuses borrowing/lending limits on a
    ClusterQueue without ``cohortName``); ``lending_limit_gpus <= nominal_gpus``
    (Kueue's ClusterQueue validation); the flavor must be in the team's cluster.
    Raises :class:`ValidationError` naming the field.
    """
    nominal = whole_count("nominal_gpus", nominal_gpus)
    borrowing = whole_count("borrowing_limit_gpus", borrowing_limit_gpus, allow_none=True)
    lending = whole_count("lending_limit_gpus", lending_limit_gpus, allow_none=True)
    errors: dict[str, str] = {}
    if flavor.cluster_id != team.cluster_id:
        errors["flavor"] = f"Flavor '{flavor.name}' is not in cluster of team '{team.slug}'."
    if team.cohort_id is None:
        for field, value in (("borrowing_limit_gpus", borrowing), ("lending_limit_gpus", lending)):
            if value is not None:
                errors[field] = (
                    f"Team '{team.slug}' is in no cohort: it cannot borrow or lend, "
                    "so this limit must be empty."
                )
    try:
        specs.check_lending_limit(nominal, lending)
    except SpecError as exc:
        errors[exc.field] = exc.message
    if errors:
        raise ValidationError(errors)
    return nominal, borrowing, lending


@transaction.atomic
def quota_request_create(
    *,
    actor,
    team: Team,
    flavor: GpuFlavor,
    nominal_gpus,
    justification: str,
    borrowing_limit_gpus=None,
    lending_limit_gpus=None,
    ends_at: datetime | None = None,
) -> QuotaRequest:
    """A team lead (or staff) asks for quota on a flavor; the request starts ``pending``.

    GPU numbers are whole GPUs; ``ends_at`` (aware datetime in the future) makes
    the quota temporary. Raises :class:`PermissionDenied` when ``actor`` is not
    the team's lead or staff, :class:`ValidationError` naming the field.
    """
    if not access.can_request_quota(actor, team):
        raise PermissionDenied("Only the team's lead or platform staff can request quota.")
    nominal, borrowing, lending = quota_values_check(
        team=team, flavor=flavor, nominal_gpus=nominal_gpus,
        borrowing_limit_gpus=borrowing_limit_gpus, lending_limit_gpus=lending_limit_gpus,
    )
    if not (justification or "").strip():
        raise ValidationError({"justification": "Say why the team needs this quota."})
    if ends_at is not None and ends_at <= timezone.now():
        raise ValidationError({"ends_at": "The end date must be in the future."})
    request = QuotaRequest.objects.create(
        team=team, flavor=flavor, requested_by=actor, nominal_gpus=nominal,
        borrowing_limit_gpus=borrowing, lending_limit_gpus=lending,
        justification=justification.strip(), ends_at=ends_at,
    )
    audit_record(
        actor=actor, action="quota_request.created", target=request, team=team,
        after={"state": request.state, "flavor": flavor.name, "nominal_gpus": nominal,
               "borrowing_limit_gpus": borrowing, "lending_limit_gpus": lending,
               "ends_at": ends_at.isoformat() if ends_at else None},
    )
    return request


def _locked_pending(request: QuotaRequest) -> QuotaRequest:
    locked = (QuotaRequest.objects.select_for_update(of=("self",))
              .select_related("team", "flavor").get(pk=request.pk))
    if locked.state != QuotaRequest.State.PENDING:
        raise ValidationError({"state": f"Request #{locked.pk} is {locked.state}, not pending."})
    return locked


@transaction.atomic
def quota_request_approve(
    *, actor, request: QuotaRequest, comment: str = "", allow_overcommit: bool = False
) -> QuotaRequest:
    """Staff approve a pending request: the grant is written in the same transaction.

    The request's numbers replace the team's grant on the flavor. When the sum
    of nominal quotas on the flavor would exceed its physical GPUs, approval
    needs ``allow_overcommit=True`` (recorded on the request). Raises
    :class:`PermissionDenied` for non-staff, :class:`ValidationError` when the
    request is not pending or its numbers no longer fit (e.g. the team left its
    cohort).
    """
    if not access.is_staff(actor):
        raise PermissionDenied("Only platform staff can approve quota requests.")
    request = _locked_pending(request)
    team, flavor = request.team, request.flavor
    nominal, borrowing, lending = quota_values_check(
        team=team, flavor=flavor, nominal_gpus=request.nominal_gpus,
        borrowing_limit_gpus=request.borrowing_limit_gpus,
        lending_limit_gpus=request.lending_limit_gpus,
    )

    after_sum = flavor_nominal_sum(flavor=flavor, replacing=(team.pk, nominal))
    if after_sum > flavor.physical_gpus and not allow_overcommit:
        raise ValidationError({
            "allow_overcommit": (
                f"Approval would commit {after_sum} nominal GPUs on '{flavor.name}', which has "
                f"{flavor.physical_gpus} physical GPUs; tick over-commit to approve anyway."
            )
        })
    grant, created = QuotaGrant.objects.select_for_update().get_or_create(
        team=team, flavor=flavor
    )
    before = None if created else grant_snapshot(grant)
    request.previous_grant = before or {"nominal_gpus": 0, "borrowing_limit_gpus": None,
                                        "lending_limit_gpus": None}
    grant.nominal_gpus, grant.borrowing_limit_gpus, grant.lending_limit_gpus = (
        nominal, borrowing, lending
    )
    grant.temporary_request = request if request.ends_at else None
    grant.save()
    request.state = QuotaRequest.State.APPROVED
    request.reviewer = actor
    request.review_comment = comment or ""
    request.reviewed_at = timezone.now()
    request.overcommit_acknowledged = after_sum > flavor.physical_gpus
    request.save()
    cluster_spec_bump(cluster_id=team.cluster_id)
    audit_record(actor=actor, action="quota_request.approved", target=request, team=team,
                 before={"state": "pending"},
                 after={"state": "approved", "overcommit": request.overcommit_acknowledged})
    audit_record(actor=actor, action="quota_grant.changed", target=grant, team=team,
                 before=before, after=grant_snapshot(grant))
    reconcile_enqueue(cluster_id=team.cluster_id)
    return request


@transaction.atomic
def quota_request_reject(*, actor, request: QuotaRequest, comment: str) -> QuotaRequest:
    """Staff reject a pending request; a comment telling the team why is required."""
    if not access.is_staff(actor):
        raise PermissionDenied("Only platform staff can reject quota requests.")
    if not (comment or "").strip():
        raise ValidationError({"comment": "Say why the request is rejected."})
    request = _locked_pending(request)
    request.state = QuotaRequest.State.REJECTED
    request.reviewer = actor
    request.review_comment = comment.strip()
    request.reviewed_at = timezone.now()
    request.save()
    audit_record(actor=actor, action="quota_request.rejected", target=request, team=request.team,
                 before={"state": "pending"},
                 after={"state": "rejected", "comment": request.review_comment})
    return request


@transaction.atomic
def quota_request_withdraw(*, actor, request: QuotaRequest) -> QuotaRequest:
    """The requesting team's lead withdraws a pending request."""
    if not access.is_lead(actor, request.team):
        raise PermissionDenied("Only the requesting team's lead can withdraw a request.")
    request = _locked_pending(request)
    request.state = QuotaRequest.State.WITHDRAWN
    request.save()
    audit_record(actor=actor, action="quota_request.withdrawn", target=request, team=request.team,
                 before={"state": "pending"}, after={"state": "withdrawn"})
    return request


def grant_expire(*, now: datetime | None = None) -> int:
    """Revert every temporary grant whose request's ``ends_at`` has passed.

    Each grant goes back to the values in force before the temporary request
    was approved (``QuotaRequest.previous_grant``), in its own transaction, with
    an audit event by the system. Idempotent: an expired request is marked
    ``expired_at`` and its grant no longer points at it. Returns the count.
    """
    now = now or timezone.now()
    count = 0
    due = QuotaGrant.objects.filter(
        temporary_request__isnull=False, temporary_request__ends_at__lte=now
    ).values_list("pk", flat=True)
    for grant_id in list(due):
        with transaction.atomic():
            grant = (
                QuotaGrant.objects.select_for_update(of=("self",))
                .select_related("temporary_request", "team")
                .filter(pk=grant_id, temporary_request__ends_at__lte=now)
                .first()
            )
            if grant is None:
                continue
            request = grant.temporary_request
            before = grant_snapshot(grant)
            previous = request.previous_grant or {}
            grant.nominal_gpus = previous.get("nominal_gpus", 0)
            grant.borrowing_limit_gpus = previous.get("borrowing_limit_gpus")
            grant.lending_limit_gpus = previous.get("lending_limit_gpus")
            grant.temporary_request = None
            grant.save()
            request.expired_at = now
            request.save(update_fields=["expired_at"])
            cluster_spec_bump(cluster_id=grant.team.cluster_id)
            audit_record(actor=None, action="quota_grant.expired", target=grant, team=grant.team,
                         before=before, after=grant_snapshot(grant))
            reconcile_enqueue(cluster_id=grant.team.cluster_id)
            count += 1
    return count

