"""Read paths for jobs: lists, the detail page, the self-refreshing rows.

Every list is a fixed number of queries however many jobs or teams: jobs come
with their team, flavor, submitter and priority class joined in, and the
viewer's roles are read once (one query) to decide who may cancel what.
"""

from __future__ import annotations

from dataclasses import dataclass

import yaml
from django.conf import settings
from django.core.paginator import Page, Paginator
from django.db.models import QuerySet
from django.http import QueryDict

from portal import access
from portal.filters import JobFilter
from portal.models import Job, Membership, Team


def jobs_visible(*, user, team: str | None = None, phase: str | None = None) -> QuerySet[Job]:
    """Jobs ``user`` may see (staff: all), optionally of team slug ``team`` and ``phase``.

    One query when evaluated (team, flavor, submitter, priority class joined).
    """
    qs = access.visible_jobs(user).select_related("team", "flavor", "submitter", "priority_class")
    if team:
        qs = qs.filter(team__slug=team)
    if phase:
        qs = qs.filter(phase=phase)
    return qs.order_by("-submitted_at", "-id")


def roles_of(*, user) -> dict[int, str]:
    """``{team_id: role}`` of ``user`` (one query; empty for anonymous users)."""
    if not getattr(user, "is_authenticated", False):
        return {}
    return dict(Membership.objects.filter(user=user).values_list("team_id", "role"))


def can_cancel(*, user, job: Job, roles: dict[int, str]) -> bool:
    """Whether ``user`` may cancel ``job`` now (no query: ``roles`` from :func:`roles_of`).

    Staff: any job; a team's lead: any job of the team; a member: their own.
    A job that is final or already being cancelled cannot be cancelled again.
    """
    if job.is_final or job.cancel_requested_at is not None:
        return False
    return access.can_cancel_job(user, job, role=roles.get(job.team_id, ""))


def job_row(job: Job, *, cancellable: bool) -> dict:
    """One list row as JSON-ready data (what the list page's script redraws).

    ``{id, name, team, phase, reason, message, queue_position (0-based),
    queue_rank (1-based, 1 = next), wait_seconds (seconds waited for admission),
    admitted_flavor, preemptions, preemption_loop, workers, gpus_per_worker,
    total_gpus, flavor, submitter, submitted_at (ISO), cancel_requested, can_cancel}``.
    """
    return {
        "id": job.pk,
        "name": job.name,
        "team": job.team.slug,
        "phase": job.phase,
        "reason": job.reason,
        "message": job.message,
        "queue_position": job.queue_position,
        "queue_rank": job.queue_rank,
        "wait_seconds": job.wait_seconds,
        "admitted_flavor": job.admitted_flavor,
        "preemptions": job.preemptions,
        "preemption_loop": job.preemption_loop,
        "workers": job.workers,
        "gpus_per_worker": job.gpus_per_worker,
        "total_gpus": job.total_gpus,
        "flavor": job.flavor.name,
        "submitter": job.submitter.username if job.submitter else "",
        "submitted_at": job.submitted_at.isoformat(),
        "cancel_requested": job.cancel_requested_at is not None,
        "can_cancel": cancellable,
    }


@dataclass(frozen=True)
class JobListPage:
    """A job list as the viewer sees it: ``team`` (``None`` = every visible team),
    the viewer's ``role`` in it, ``rows`` (``(job, can_cancel)``) of the current page,
    ``teams`` the viewer may submit to, the bound ``filters``
    (:class:`portal.filters.JobFilter`, errors included) and the Django ``pager``
    page (``pager.paginator.count`` = all matching jobs)."""

    team: Team | None
    role: str | None
    rows: list[tuple[Job, bool]]
    teams: list[Team]
    filters: JobFilter | None = None
    pager: Page | None = None

    @property
    def query(self) -> str:
        """The filter part of the URL (``phase=Queued&q=llm``), without ``page``."""
        if self.filters is None:
            return ""
        params = self.filters.data.copy()
        params.pop("page", None)
        return params.urlencode()

    def as_json(self) -> list[dict]:
        """The rows as :func:`job_row` dicts."""
        return [job_row(job, cancellable=ok) for job, ok in self.rows]


def job_list_page(*, user, slug: str | None = None, params=None) -> JobListPage | None:
    """The job list of team ``slug`` (or of all visible teams), ``None`` if not visible.

    ``params`` (a QueryDict: the page's GET) filters it (:class:`JobFilter`: phase,
    team, submitter, flavor, name, age) and picks the page (``page``, 1-based;
    :data:`settings.PAGE_LIST_SIZE` rows, newest first; an out-of-range page shows the
    last). Four queries whatever the number of jobs and teams: the viewer's roles, the
    visible teams, the count of matching jobs and the page's jobs. Invalid filters
    show no job (their errors are on ``filters``).
    """
    if not getattr(user, "is_authenticated", False):
        return None
    roles = roles_of(user=user)
    teams = list(access.visible_teams(user).select_related("cluster").order_by("slug"))
    team = None
    if slug is not None:
        team = next((t for t in teams if t.slug == slug), None)
        if team is None:
            return None
    params = params if params is not None else QueryDict()
    filters = JobFilter(params, queryset=jobs_visible(user=user, team=slug))
    matching = filters.qs if filters.is_valid() else Job.objects.none()
    pager = Paginator(matching, settings.PAGE_LIST_SIZE).get_page(params.get("page"))
    return JobListPage(
        team=team,
        role=roles.get(team.pk) if team else None,
        rows=[(job, can_cancel(user=user, job=job, roles=roles)) for job in pager],
        teams=teams,
        filters=filters,
        pager=pager,
    )


def _sorted(value):
    if isinstance(value, dict):
        return {k: _sorted(value[k]) for k in sorted(value)}
    if isinstance(value, list):
        return [_sorted(v) for v in value]
    return value


def manifest_yaml(manifest: dict | None) -> str:
    """The manifest as YAML: ``apiVersion, kind, metadata, spec`` first, then keys sorted
    (PostgreSQL's jsonb keeps no key order)."""
    if not manifest:
        return ""
    head = ("apiVersion", "kind", "metadata", "spec")
    ordered = {k: _sorted(manifest[k]) for k in head if k in manifest}
    ordered.update({k: _sorted(v) for k, v in sorted(manifest.items()) if k not in head})
    return yaml.safe_dump(ordered, sort_keys=False)


@dataclass(frozen=True)
class JobDetailPage:
    """One job as the viewer sees it, with its manifest as YAML and the timeline."""

    job: Job
    can_cancel: bool
    manifest_yaml: str
    timeline: list[dict]


def job_detail_page(*, user, slug: str, job_id: int) -> JobDetailPage | None:
    """Job ``job_id`` of team ``slug`` if ``user`` may see it, else ``None`` (404).

    Two queries: the job (joined) and the viewer's roles.
    """
    job = jobs_visible(user=user, team=slug).filter(pk=job_id).first()
    if job is None:
        return None
    roles = roles_of(user=user)
    text = manifest_yaml(job.manifest)
    timeline = sorted(job.timeline or [], key=lambda item: str(item.get("at") or ""))
    return JobDetailPage(job=job, can_cancel=can_cancel(user=user, job=job, roles=roles),
                         manifest_yaml=text, timeline=timeline)


@dataclass(frozen=True)
class JobFormContext:
    """What the submit form needs: the team, the flavors it holds quota on, priority classes."""

    team: Team
    flavors: list
    priorities: list


def job_form_context(*, user, slug: str) -> JobFormContext | None:
    """The submit form of team ``slug`` for ``user``, ``None`` if the team is not visible.

    Three queries: the team, its flavors with a grant, the priority classes.
    """
    from portal.models import GpuFlavor, PriorityClass

    team = access.visible_teams(user).select_related("cluster").filter(slug=slug).first()
    if team is None:
        return None
    flavors = list(GpuFlavor.objects.filter(cluster_id=team.cluster_id, grants__team=team)
                   .order_by("name").distinct())
    return JobFormContext(team=team, flavors=flavors,
                          priorities=list(PriorityClass.objects.order_by("-value", "name")))
