"""Job pages: the submit form (with live validation), lists that refresh themselves,
the detail page with the timeline and the rendered YAML, cancel and refresh.

A job or team the viewer may not see answers 404 on every URL; a role that may
not cancel gets 403.
"""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from portal import access
from portal.forms import JobForm, add_service_error, plain_item_message
from portal.selectors.jobs import (
    JobFormContext,
    job_detail_page,
    job_form_context,
    job_list_page,
    jobs_visible,
)
from portal.services.jobs import job_cancel, job_check, job_refresh, job_submit


def _list_or_404(request: HttpRequest, slug: str | None):
    page = job_list_page(user=request.user, slug=slug, params=request.GET)
    if page is None:
        raise Http404("No such team.")
    return page


@login_required
@require_GET
def job_list(request: HttpRequest, slug: str | None = None) -> HttpResponse:
    """``GET /jobs/`` (every visible team) and ``GET /teams/<slug>/jobs/``."""
    page = _list_or_404(request, slug)
    return render(request, "portal/job_list.html", {"page": page, "team": page.team})


@login_required
@require_GET
def job_rows(request: HttpRequest, slug: str | None = None) -> JsonResponse:
    """``GET /jobs/rows.json`` and ``/teams/<slug>/jobs/rows.json``: the list's rows as
    JSON (``{"jobs": [...], "total": N, "page": P, "pages": K}``) with the page's own
    filters and page number, what the page's script polls to refresh itself."""
    page = _list_or_404(request, slug)
    return JsonResponse({"jobs": page.as_json(), "total": page.pager.paginator.count,
                         "page": page.pager.number, "pages": page.pager.paginator.num_pages})


def _form_context(request: HttpRequest, slug: str) -> JobFormContext:
    context = job_form_context(user=request.user, slug=slug)
    if context is None:
        raise Http404("No such team.")
    return context


def _job_form(context: JobFormContext, data=None) -> JobForm:
    return JobForm(data, flavors=context.flavors, priorities=context.priorities)


@login_required
def job_new(request: HttpRequest, slug: str) -> HttpResponse:
    """``GET|POST /teams/<slug>/jobs/new/``: the submit form; POST submits."""
    context = _form_context(request, slug)
    form = _job_form(context, request.POST if request.method == "POST" else None)
    if request.method == "POST" and form.is_valid():
        try:
            job = job_submit(actor=request.user, team=context.team, **form.service_kwargs())
        except ValidationError as exc:
            add_service_error(form, exc)
        else:
            messages.success(request, f"Job {job.name} submitted.")
            return redirect("job-page", slug=slug, pk=job.pk)
    status = 400 if request.method == "POST" else 200
    return render(request, "portal/job_form.html",
                  {"form": form, "team": context.team, "context": context}, status=status)


@login_required
@require_POST
def job_validate(request: HttpRequest, slug: str) -> JsonResponse:
    """``POST /teams/<slug>/jobs/validate/``: check the form without submitting.

    Answers ``{"valid": bool, "errors": {field: [message]}, "total_gpus": int|null,
    "max_gpus": int|null, "gpu_resource": str|null}``; writes nothing.
    """
    context = _form_context(request, slug)
    form = _job_form(context, request.POST)
    errors: dict[str, list[str]] = {}
    total = maximum = resource = None
    if form.is_valid():
        try:
            plan = job_check(actor=request.user, team=context.team, **form.service_kwargs())
        except ValidationError as exc:
            errors = {k: [plain_item_message(m) for m in v] for k, v in exc.message_dict.items()}
        else:
            total, maximum, resource = plan.total_gpus, plan.max_gpus, plan.flavor.gpu_resource
    else:
        errors = {k: list(v) for k, v in form.errors.items()}
    return JsonResponse({"valid": not errors, "errors": errors, "total_gpus": total,
                         "max_gpus": maximum, "gpu_resource": resource})


@login_required
@require_GET
def job_detail(request: HttpRequest, slug: str, pk: int) -> HttpResponse:
    """``GET /teams/<slug>/jobs/<id>/``: status, explanation, timeline, rendered YAML."""
    page = job_detail_page(user=request.user, slug=slug, job_id=pk)
    if page is None:
        raise Http404("No such job.")
    return render(request, "portal/job_detail.html", {"page": page, "job": page.job,
                                                      "team": page.job.team})


def _visible_job(request: HttpRequest, slug: str, pk: int):
    job = jobs_visible(user=request.user, team=slug).filter(pk=pk).first()
    if job is None:
        raise Http404("No such job.")
    return job


@login_required
@require_http_methods(["GET", "POST"])
def job_cancel_view(request: HttpRequest, slug: str, pk: int) -> HttpResponse:
    """``GET /teams/<slug>/jobs/<id>/cancel/``: the confirmation page (what cancelling
    does, "Yes, cancel" / "Keep it"); ``POST``: cancel. Lead (any team job), member
    (own), staff; another role gets 403, an invisible job 404."""
    job = _visible_job(request, slug, pk)
    if request.method == "GET":
        if not access.can_cancel_job(request.user, job):
            raise PermissionDenied("You may cancel only your own jobs (a team lead may "
                                   "cancel any of the team's).")
        return render(request, "portal/job_cancel_confirm.html", {"job": job, "team": job.team})
    try:
        job_cancel(actor=request.user, job=job)
    except ValidationError as exc:
        messages.error(request, " ".join(exc.messages))
    else:
        messages.success(request, f"Cancelling job {job.name}: its Workload is deactivated, "
                                  "then the job is deleted.")
    return redirect("job-page", slug=slug, pk=pk)


@login_required
@require_POST
def job_refresh_view(request: HttpRequest, slug: str, pk: int) -> HttpResponse:
    """``POST /teams/<slug>/jobs/<id>/refresh/``: read the status from the cluster now."""
    job = _visible_job(request, slug, pk)
    job_refresh(job=job)
    messages.info(request, f"Refreshing {job.name} from the cluster.")
    return redirect("job-page", slug=slug, pk=pk)
