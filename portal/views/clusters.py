"""Staff pages of what the portal manages on each cluster: objects, YAML, drift."""

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render

from portal.selectors.cluster_state import (
    cluster_objects_page,
    clusters_overview,
    managed_object_detail,
)
from portal.views.staff import staff_required


@staff_required
def cluster_list(request: HttpRequest) -> HttpResponse:
    """``GET /staff/clusters/``: every cluster with its reconcile state and object counts."""
    return render(request, "portal/staff/clusters.html", {"clusters": list(clusters_overview())})


@staff_required
def cluster_objects(request: HttpRequest, name: str) -> HttpResponse:
    """``GET /staff/clusters/<name>/objects/``: every managed object with state and drift."""
    page = cluster_objects_page(name=name)
    if page is None:
        raise Http404("No such cluster.")
    return render(request, "portal/staff/cluster_objects.html", {"page": page,
                                                                  "cluster": page.cluster})


@staff_required
def object_detail(request: HttpRequest, name: str, pk: int) -> HttpResponse:
    """``GET /staff/clusters/<name>/objects/<id>/``: desired vs observed YAML, diff, drift."""
    detail = managed_object_detail(cluster_name=name, pk=pk)
    if detail is None:
        raise Http404("No such object.")
    return render(request, "portal/staff/object_detail.html", {"detail": detail,
                                                                "cluster": detail.cluster})
