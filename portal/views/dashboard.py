"""The signed-in landing page."""

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from portal.selectors.teams import teams_for_user


@login_required
def dashboard(request: HttpRequest) -> HttpResponse:
    """Render the dashboard: the user's teams (staff: all) with their quotas."""
    return render(request, "portal/dashboard.html", {"teams": teams_for_user(user=request.user)})
