"""Teams and their members."""

from decimal import Decimal, InvalidOperation

from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction

from portal import access
from portal.models import Cluster, Cohort, Membership, Team
from portal.models.validators import validate_dns1123_label
from portal.services.audit import audit_record
from portal.services.outbox import cluster_spec_bump, reconcile_enqueue

#: Volcano's Queue ``spec.weight`` is an int32 in 1..65535 (Queue CRD).
VOLCANO_MAX_WEIGHT = 65535
#: Queues Volcano creates itself; a team or cohort of that name would collide with them.
VOLCANO_RESERVED_NAMES = frozenset({"root", "default"})


def weight_value(field: str, value, *, backend: str = "kueue") -> Decimal:
    """A fair-sharing weight as a Decimal > 0 (the renderers need a positive weight for
    Kueue's ``fairSharing.weight`` and Volcano's ``weight``); errors name ``field``.

    ``backend="volcano"``: Volcano takes a whole number 1..65535, so ``1.5`` is
    refused there (Kueue accepts it). Raises :class:`ValidationError` ``{field: ...}``.
    """
    try:
        weight = Decimal(str(value))
    except (InvalidOperation, ValueError) as exc:
        raise ValidationError({field: f"'{value}' is not a number."}) from exc
    if not weight.is_finite() or weight <= 0:
        raise ValidationError({field: f"{value} must be a number greater than 0."})
    if weight > Decimal("99999"):
        raise ValidationError({field: f"{value} is larger than 99999."})
    if backend == Cluster.Backend.VOLCANO:
        if weight != weight.to_integral_value():
            raise ValidationError({field: f"{value} is not a whole number: Volcano queue "
                                          "weights are whole numbers from 1 to 65535."})
        if weight > VOLCANO_MAX_WEIGHT:
            raise ValidationError({field: f"{value} is larger than {VOLCANO_MAX_WEIGHT}, the "
                                          "largest Volcano queue weight."})
    return weight


def volcano_queue_name(field: str, name: str, *, cluster: Cluster) -> None:
    """On a Volcano cluster, refuse a team or cohort ``name`` that another Queue already has.

    Teams and cohorts both become cluster-scoped Volcano Queues, so a team
    slug may not equal a cohort name of the same cluster, nor ``root`` or
    ``default``. No-op for other backends. Raises :class:`ValidationError`.
    """
    if cluster.backend != Cluster.Backend.VOLCANO:
        return
    if name in VOLCANO_RESERVED_NAMES:
        raise ValidationError({field: f"'{name}' is a queue Volcano creates itself."})
    if (Team.objects.filter(cluster=cluster, slug=name).exists()
            or Cohort.objects.filter(cluster=cluster, name=name).exists()):
        raise ValidationError(
            {field: f"'{name}' already names a Volcano queue (a team or cohort) in "
                    f"'{cluster.name}'."})


def dns_label(field: str, value: str) -> str:
    """Return ``value`` if it is a DNS-1123 label, else a ValidationError naming ``field``."""
    try:
        validate_dns1123_label(value or "")
    except ValidationError as exc:
        raise ValidationError({field: exc.messages}) from exc
    return value


@transaction.atomic
def team_create(
    *, actor, slug: str, name: str, cluster: Cluster, cohort: Cohort | None = None,
    weight=Decimal("1"),
) -> Team:
    """Staff create a team; ``slug`` becomes its namespace name, used as is.

    Raises :class:`PermissionDenied` for non-staff and :class:`ValidationError`
    naming ``slug`` (not a DNS-1123 label, more than 63 characters, taken),
    ``cohort`` (other cluster) or ``weight`` (on a Volcano cluster: a whole
    number 1..65535, and a slug that is no cohort's name).
    """
    if not access.is_staff(actor):
        raise PermissionDenied("Only platform staff can create teams.")
    dns_label("slug", slug)
    weight = weight_value("weight", weight, backend=cluster.backend)
    if Team.objects.filter(slug=slug).exists():
        raise ValidationError({"slug": f"A team with slug '{slug}' already exists."})
    volcano_queue_name("slug", slug, cluster=cluster)
    if cohort is not None and cohort.cluster_id != cluster.pk:
        raise ValidationError({"cohort": f"Cohort '{cohort.name}' is in another cluster."})
    team = Team.objects.create(
        slug=slug, name=(name or slug).strip(), cluster=cluster, cohort=cohort, weight=weight
    )
    cluster_spec_bump(cluster_id=cluster.pk)
    audit_record(actor=actor, action="team.created", target=team, team=team,
                 after={"slug": slug, "cohort": cohort.name if cohort else None,
                        "weight": str(weight)})
    return team


@transaction.atomic
def membership_set(*, actor, team: Team, username: str, role: str) -> Membership:
    """Add ``username`` to ``team`` with ``role`` (``member``/``lead``), or change the role.

    Allowed for the team's lead and staff; a lead cannot demote the team's last lead.
    Raises :class:`ValidationError` naming ``username`` (no such user, last lead) or
    ``role``. The permission check comes first, so only those who may manage members
    learn whether a username exists: a lead may (usernames are the organisation's
    accounts, not secrets among its staff; see README "Security").
    """
    if not access.can_manage_members(actor, team):
        raise PermissionDenied("Only the team's lead or platform staff can manage members.")
    if role not in Membership.Role.values:
        raise ValidationError({"role": f"'{role}' is not one of: member, lead."})
    user = get_user_model().objects.filter(username=username).first()
    if user is None:
        raise ValidationError({"username": f"No user named '{username}'."})
    membership = Membership.objects.filter(team=team, user=user).first()
    if membership is not None and membership.role == Membership.Role.LEAD and role != "lead":
        _keep_a_lead(actor, team, username, "demote")
    before = {"role": membership.role} if membership else None
    if membership is None:
        membership = Membership.objects.create(team=team, user=user, role=role)
    elif membership.role != role:
        membership.role = role
        membership.save(update_fields=["role"])
    audit_record(actor=actor, action="membership.set", target=membership, team=team,
                 before=before, after={"username": username, "role": role})
    return membership


def _keep_a_lead(actor, team: Team, username: str, verb: str) -> None:
    """Refuse (ValidationError on ``username``) to take away the team's last lead, unless
    staff do it. The team's lead rows are locked, so two leads demoting each other at
    once cannot both succeed."""
    if access.is_staff(actor):
        return
    leads = list(Membership.objects.select_for_update()
                 .filter(team=team, role=Membership.Role.LEAD).values_list("pk", flat=True))
    if len(leads) <= 1:
        raise ValidationError({"username": f"Cannot {verb} '{username}': the last lead of "
                                           f"'{team.slug}'. Make another member lead first."})


@transaction.atomic
def membership_remove(*, actor, team: Team, username: str) -> None:
    """Remove ``username`` from ``team`` (lead or staff). Raises ValidationError if absent,
    or when a lead would remove the team's last lead."""
    if not access.can_manage_members(actor, team):
        raise PermissionDenied("Only the team's lead or platform staff can manage members.")
    membership = Membership.objects.filter(team=team, user__username=username).first()
    if membership is None:
        raise ValidationError({"username": f"'{username}' is not a member of '{team.slug}'."})
    if membership.role == Membership.Role.LEAD:
        _keep_a_lead(actor, team, username, "remove")
    audit_record(actor=actor, action="membership.removed", target=membership, team=team,
                 before={"username": username, "role": membership.role}, after=None)
    membership.delete()


@transaction.atomic
def team_delete(*, actor, team: Team) -> None:
    """Staff remove a team: its grants, requests and memberships go with it.

    The cluster's spec generation is bumped and a reconcile enqueued on
    commit: the reconciler prunes the team's ClusterQueue, LocalQueue and
    ResourceQuota, and keeps its Namespace (and anything not ours in it).
    Raises :class:`PermissionDenied` for non-staff.
    """
    if not access.is_staff(actor):
        raise PermissionDenied("Only platform staff can remove teams.")
    cluster_id = team.cluster_id
    audit_record(actor=actor, action="team.deleted", target=team, team=None,
                 before={"slug": team.slug, "cluster_id": cluster_id})
    team.delete()
    cluster_spec_bump(cluster_id=cluster_id)
    reconcile_enqueue(cluster_id=cluster_id)
