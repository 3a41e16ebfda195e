"""Team pages: the list, one team's quota, members and requests, and their forms.

A team the user does not belong to (and that staff do not oversee) answers 404
on the page and on every sub-URL.
"""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from portal.forms import MemberForm, QuotaRequestForm, add_service_error
from portal.models import QuotaRequest
from portal.selectors.cluster_state import request_cluster_state, team_cluster_state
from portal.selectors.teams import TeamPage, team_page, teams_for_user
from portal.services.quota import quota_request_create, quota_request_withdraw
from portal.services.teams import membership_remove, membership_set
from portal.views.fairness import team_fairness_chart
from portal.views.utilization import team_utilization_panel


def _page_or_404(request: HttpRequest, slug: str) -> TeamPage:
    page = team_page(user=request.user, slug=slug)
    if page is None:
        raise Http404("No such team.")
    return page


def _render_team(request, page: TeamPage, *, quota_form=None, member_form=None, status=200):
    if quota_form is None and page.can_request:
        quota_form = QuotaRequestForm(flavors=page.flavors)
    if member_form is None and page.can_manage:
        member_form = MemberForm()
    return render(request, "portal/team_detail.html", {
        "page": page, "team": page.team, "quota_form": quota_form, "member_form": member_form,
        "cluster_state": team_cluster_state(team=page.team),
        "fairness_chart": team_fairness_chart(team=page.team, flavors=page.flavors),
        "utilization": team_utilization_panel(team=page.team),
    }, status=status)


@login_required
def team_list(request: HttpRequest) -> HttpResponse:
    """``GET /teams/``: the user's teams (staff: all) with their quotas."""
    return render(request, "portal/team_list.html", {"teams": teams_for_user(user=request.user)})


@login_required
def team_detail(request: HttpRequest, slug: str) -> HttpResponse:
    """``GET|POST /teams/<slug>/``: quotas, members, requests; POST requests quota."""
    page = _page_or_404(request, slug)
    if request.method != "POST":
        return _render_team(request, page)
    if not page.can_request:
        raise PermissionDenied("Only the team's lead or platform staff can request quota.")
    form = QuotaRequestForm(request.POST, flavors=page.flavors)
    if form.is_valid():
        try:
            created = quota_request_create(actor=request.user, team=page.team,
                                           **form.service_kwargs())
        except ValidationError as exc:
            add_service_error(form, exc)
        else:
            messages.success(request, f"Request #{created.pk} submitted for review.")
            return redirect("team-page", slug=slug)
    return _render_team(request, page, quota_form=form)


@login_required
def request_detail(request: HttpRequest, slug: str, pk: int) -> HttpResponse:
    """``GET /teams/<slug>/requests/<id>/``: one request and the cluster state of its objects.

    Team members and staff; the objects are those approval changes (the
    team's Namespace, ResourceQuota, ClusterQueue, LocalQueue).
    """
    page = _page_or_404(request, slug)
    quota_request = get_object_or_404(
        QuotaRequest.objects.select_related("flavor", "requested_by", "reviewer"),
        pk=pk, team=page.team,
    )
    quota_request.team = page.team  # already loaded, with its cluster
    return render(request, "portal/team_request.html", {
        "page": page, "team": page.team, "quota_request": quota_request,
        "cluster_state": request_cluster_state(request=quota_request),
    })


@login_required
@require_POST
def request_withdraw(request: HttpRequest, slug: str, pk: int) -> HttpResponse:
    """``POST /teams/<slug>/requests/<id>/withdraw/``: the lead withdraws a pending request."""
    page = _page_or_404(request, slug)
    quota_request = get_object_or_404(QuotaRequest, pk=pk, team=page.team)
    try:
        quota_request_withdraw(actor=request.user, request=quota_request)
    except ValidationError as exc:
        messages.error(request, " ".join(exc.messages))
    else:
        messages.success(request, f"Request #{pk} withdrawn.")
    return redirect("team-page", slug=slug)


@login_required
@require_POST
def member_add(request: HttpRequest, slug: str) -> HttpResponse:
    """``POST /teams/<slug>/members/``: add a member or change a role (lead, staff)."""
    page = _page_or_404(request, slug)
    if not page.can_manage:
        raise PermissionDenied("Only the team's lead or platform staff can manage members.")
    form = MemberForm(request.POST)
    if form.is_valid():
        try:
            membership_set(actor=request.user, team=page.team, **form.cleaned_data)
        except ValidationError as exc:
            add_service_error(form, exc)
        else:
            messages.success(request, f"{form.cleaned_data['username']} is now "
                                      f"{form.cleaned_data['role']} of {slug}.")
            return redirect("team-page", slug=slug)
    return _render_team(request, page, member_form=form)


@login_required
@require_POST
def member_remove(request: HttpRequest, slug: str, username: str) -> HttpResponse:
    """``POST /teams/<slug>/members/<username>/remove/``: remove a member (lead, staff)."""
    page = _page_or_404(request, slug)
    try:
        membership_remove(actor=request.user, team=page.team, username=username)
    except ValidationError as exc:
        messages.error(request, " ".join(exc.messages))
    else:
        messages.success(request, f"{username} removed from {slug}.")
    return redirect("team-page", slug=slug)
