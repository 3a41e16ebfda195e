"""Page-numbered lists whose body stays a JSON array (the API's contract since v1).

``?page=N`` (1-based) and ``?page_size=M`` (default :data:`settings.API_PAGE_SIZE`,
at most :data:`settings.API_MAX_PAGE_SIZE`); the total and the way on travel in
headers, as GitHub's API does: ``X-Total-Count`` (all matching rows), ``X-Page``,
``X-Page-Size`` and ``Link`` (RFC 8288: ``rel="next"``, ``"prev"``, ``"first"``,
``"last"``). A page past the end is a 404 naming the page. The order is the
queryset's, which every list endpoint keeps stable (a unique key last).
"""

from __future__ import annotations

from django.conf import settings
from rest_framework.pagination import PageNumberPagination
from rest_framework.response import Response
from rest_framework.utils.urls import remove_query_param, replace_query_param


class HeaderPageNumberPagination(PageNumberPagination):
    """DRF's page-number pagination with the page's links in headers, body unchanged."""

    page_query_param = "page"
    page_size_query_param = "page_size"

    @property
    def page_size(self) -> int:
        return settings.API_PAGE_SIZE

    @property
    def max_page_size(self) -> int:
        return settings.API_MAX_PAGE_SIZE

    def _link(self, number: int) -> str:
        url = self.request.build_absolute_uri()
        if number == 1:
            return remove_query_param(url, self.page_query_param)
        return replace_query_param(url, self.page_query_param, number)

    def get_paginated_response(self, data) -> Response:
        """``data`` (the page's rows) as the body; count and links as headers."""
        page = self.page
        last = page.paginator.num_pages
        links = [f'<{self._link(1)}>; rel="first"', f'<{self._link(last)}>; rel="last"']
        if page.has_next():
            links.append(f'<{self._link(page.next_page_number())}>; rel="next"')
        if page.has_previous():
            links.append(f'<{self._link(page.previous_page_number())}>; rel="prev"')
        return Response(data, headers={
            "X-Total-Count": str(page.paginator.count), "X-Page": str(page.number),
            "X-Page-Size": str(page.paginator.per_page), "Link": ", ".join(links)})

    def get_paginated_response_schema(self, schema: dict) -> dict:
        """The body is the plain array: pagination lives in headers."""
        return schema

    def get_schema_operation_parameters(self, view) -> list[dict]:
        params = super().get_schema_operation_parameters(view)
        for param in params:
            if param["name"] == self.page_size_query_param:
                param["description"] = (f"rows per page (default {settings.API_PAGE_SIZE}, "
                                        f"at most {settings.API_MAX_PAGE_SIZE})")
            if param["name"] == self.page_query_param:
                param["description"] = ("1-based page number; the total is in X-Total-Count, "
                                        "the next page in the Link header")
        return params
