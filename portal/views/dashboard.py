"""The signed-in landing page."""

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render


@login_required
def dashboard(request: HttpRequest) -> HttpResponse:
    """Render the dashboard shell for the signed-in user."""
    return render(request, "portal/dashboard.html", {})
