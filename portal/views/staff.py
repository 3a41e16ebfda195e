"""Staff pages: the review queue and the review of one quota request."""

from functools import wraps

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from portal import access
from portal.forms import ReviewApproveForm, ReviewRejectForm, add_service_error
from portal.selectors.cluster_state import request_cluster_state
from portal.selectors.quota import pending_requests, quota_request_review
from portal.services.quota import quota_request_approve, quota_request_reject


def staff_required(view):
    """Anonymous users go to the login page; signed-in non-staff get 403."""

    @login_required
    @wraps(view)
    def wrapper(request, *args, **kwargs):
        if not access.is_staff(request.user):
            raise PermissionDenied("Only platform staff can see this page.")
        return view(request, *args, **kwargs)

    return wrapper


def _review(request: HttpRequest, pk: int) -> dict:
    review = quota_request_review(request_id=pk)
    if review is None:
        raise Http404("No such request.")
    return review


def _render_review(request, review, *, approve_form=None, reject_form=None):
    return render(request, "portal/staff/review.html", {
        **review,
        "cluster_state": request_cluster_state(request=review["quota_request"]),
        "approve_form": approve_form or ReviewApproveForm(prefix="approve"),
        "reject_form": reject_form or ReviewRejectForm(prefix="reject"),
    })


@staff_required
def review_queue(request: HttpRequest) -> HttpResponse:
    """``GET /staff/requests/``: pending requests, oldest first."""
    return render(request, "portal/staff/queue.html", {"requests": list(pending_requests())})


@staff_required
def review_detail(request: HttpRequest, pk: int) -> HttpResponse:
    """``GET /staff/requests/<id>/``: the request, its preview and its manifests."""
    return _render_review(request, _review(request, pk))


@staff_required
@require_POST
def review_approve(request: HttpRequest, pk: int) -> HttpResponse:
    """``POST /staff/requests/<id>/approve/``: approve, or show why not."""
    review = _review(request, pk)
    form = ReviewApproveForm(request.POST, prefix="approve")
    if form.is_valid():
        try:
            quota_request_approve(actor=request.user, request=review["quota_request"],
                                  **form.cleaned_data)
        except ValidationError as exc:
            add_service_error(form, exc)
        else:
            messages.success(request, f"Request #{pk} approved: the grant of "
                                      f"{review['quota_request'].team.slug} is updated.")
            return redirect("review-queue")
    return _render_review(request, review, approve_form=form)


@staff_required
@require_POST
def review_reject(request: HttpRequest, pk: int) -> HttpResponse:
    """``POST /staff/requests/<id>/reject/``: reject with a comment, or show why not."""
    review = _review(request, pk)
    form = ReviewRejectForm(request.POST, prefix="reject")
    if form.is_valid():
        try:
            quota_request_reject(actor=request.user, request=review["quota_request"],
                                 **form.cleaned_data)
        except ValidationError as exc:
            add_service_error(form, exc)
        else:
            messages.success(request, f"Request #{pk} rejected.")
            return redirect("review-queue")
    return _render_review(request, review, reject_form=form)
