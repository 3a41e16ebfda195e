"""Response headers Django has no setting for."""

from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse


class PermissionsPolicyMiddleware:
    """Add ``Permissions-Policy: settings.PERMISSIONS_POLICY`` to every response.

    A view's own header wins; an empty setting sends none.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        policy = settings.PERMISSIONS_POLICY
        if policy and "Permissions-Policy" not in response:
            response["Permissions-Policy"] = policy
        return response
