"""Read paths for the team pages: a fixed number of queries however big the team."""

from dataclasses import dataclass

from django.db.models import OuterRef, Prefetch, QuerySet, Subquery

from portal import access
from portal.models import GpuFlavor, Membership, QuotaGrant, QuotaRequest, Team


def _grants_prefetch() -> Prefetch:
    return Prefetch(
        "grants",
        QuotaGrant.objects.select_related("flavor", "temporary_request").order_by("flavor__name"),
    )


def teams_for_user(*, user) -> QuerySet[Team]:
    """Teams ``user`` may see (staff: all) with cluster, cohort and grants (two queries).

    Each team carries ``my_role`` (``"lead"``, ``"member"`` or ``None`` for staff
    outside the team).
    """
    role = Membership.objects.filter(team=OuterRef("pk"), user_id=user.pk).values("role")[:1]
    return (
        access.visible_teams(user)
        .select_related("cluster", "cohort")
        .annotate(my_role=Subquery(role))
        .prefetch_related(_grants_prefetch())
        .order_by("slug")
    )


@dataclass(frozen=True)
class TeamPage:
    """Everything the team page shows, loaded in a fixed number of queries.

    ``role`` is the viewer's role in the team (``None`` for staff outside it);
    ``can_request``/``can_manage``/``can_withdraw`` say which forms to show.
    """

    team: Team
    role: str | None
    can_request: bool
    can_manage: bool
    can_withdraw: bool
    grants: list[QuotaGrant]
    memberships: list[Membership]
    requests: list[QuotaRequest]
    flavors: list[GpuFlavor]

    @property
    def leads(self) -> list[Membership]:
        """The team's leads (who request quota), from ``memberships``; no query."""
        return [m for m in self.memberships if m.role == Membership.Role.LEAD]


def team_page(*, user, slug: str) -> TeamPage | None:
    """The team page of ``slug`` as ``user`` sees it, or ``None`` when ``user`` may not.

    Five queries: the team with the viewer's role, then grants, members,
    requests and the cluster's flavors. A team the viewer neither belongs to
    nor (as staff) oversees is ``None`` (the page answers 404).
    """
    if not getattr(user, "is_authenticated", False):
        return None
    role_sq = Membership.objects.filter(team=OuterRef("pk"), user_id=user.pk).values("role")[:1]
    team = (
        Team.objects.select_related("cluster", "cohort")
        .annotate(my_role=Subquery(role_sq))
        .filter(slug=slug)
        .first()
    )
    staff = access.is_staff(user)
    if team is None or (team.my_role is None and not staff):
        return None
    lead = team.my_role == Membership.Role.LEAD
    return TeamPage(
        team=team,
        role=team.my_role,
        can_request=staff or lead,
        can_manage=staff or lead,
        can_withdraw=lead,
        grants=list(
            QuotaGrant.objects.filter(team=team)
            .select_related("flavor", "temporary_request")
            .order_by("flavor__name")
        ),
        memberships=list(
            Membership.objects.filter(team=team).select_related("user").order_by(
                "role", "user__username"
            )
        ),
        requests=list(
            QuotaRequest.objects.filter(team=team)
            .select_related("flavor", "requested_by", "reviewer")
            .order_by("-created_at", "-id")
        ),
        flavors=list(GpuFlavor.objects.filter(cluster_id=team.cluster_id).order_by("name")),
    )
