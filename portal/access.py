"""Who may see and do what: the one place both pages and API ask.

Roles: platform staff (``user.is_staff``), a team's ``lead`` and ``member``.
Teams a user does not belong to are invisible to them (404, never 403).
"""

from django.db.models import QuerySet

from portal.models import Job, Membership, Team


def is_staff(user) -> bool:
    """True for an active, signed-in platform staff user."""
    return bool(getattr(user, "is_authenticated", False) and user.is_active and user.is_staff)


def role_in(user, team: Team) -> str | None:
    """``"lead"``, ``"member"`` or ``None`` for ``user`` in ``team`` (one query)."""
    if not getattr(user, "is_authenticated", False):
        return None
    return (
        Membership.objects.filter(user=user, team=team).values_list("role", flat=True).first()
    )


def is_lead(user, team: Team) -> bool:
    """True when ``user`` leads ``team``."""
    return role_in(user, team) == Membership.Role.LEAD


def can_see_team(user, team: Team) -> bool:
    """Staff see every team; others only the teams they belong to."""
    return is_staff(user) or role_in(user, team) is not None


def can_request_quota(user, team: Team) -> bool:
    """The team's lead and platform staff may request quota."""
    return is_staff(user) or is_lead(user, team)


def can_manage_members(user, team: Team) -> bool:
    """The team's lead and platform staff may add and remove members."""
    return is_staff(user) or is_lead(user, team)


def visible_teams(user) -> QuerySet[Team]:
    """Teams ``user`` may see: all for staff, their own otherwise (a queryset)."""
    if is_staff(user):
        return Team.objects.all()
    if not getattr(user, "is_authenticated", False):
        return Team.objects.none()
    return Team.objects.filter(memberships__user=user).distinct()


def visible_jobs(user) -> QuerySet:
    """Jobs ``user`` may see: all for staff, those of their teams otherwise (a queryset).

    A job of a team the user does not belong to is invisible (404, never 403).
    """
    if is_staff(user):
        return Job.objects.all()
    if not getattr(user, "is_authenticated", False):
        return Job.objects.none()
    return Job.objects.filter(team__memberships__user=user)


def can_submit_job(user, team: Team) -> bool:
    """Every member and lead of ``team`` may submit jobs to it; staff to any team."""
    return is_staff(user) or role_in(user, team) is not None


def can_cancel_job(user, job, *, role: str | None = None) -> bool:
    """Staff cancel any job; a team's lead any job of the team; a member only their own.

    ``role``: the user's role in the job's team when the caller already knows it
    (saves the query).
    """
    if is_staff(user):
        return True
    if not getattr(user, "is_authenticated", False):
        return False
    role = role if role is not None else role_in(user, job.team)
    if role == Membership.Role.LEAD:
        return True
    return role == Membership.Role.MEMBER and job.submitter_id == user.pk
