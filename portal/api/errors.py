"""Errors as JSON that name the offending field."""

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import ValidationError as DjangoValidationError
from rest_framework import exceptions
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.views import exception_handler as drf_exception_handler


def exception_handler(exc, context):
    """DRF's handler, plus service errors: Django ``ValidationError`` -> 400 with
    ``{field: [messages]}``, Django ``PermissionDenied`` -> 403 ``{detail}``. A failed
    authentication (401) counts against the client IP's ``anon`` rate
    (:mod:`portal.api.auth`)."""
    request = context.get("request")
    if request is not None and isinstance(
            exc, exceptions.NotAuthenticated | exceptions.AuthenticationFailed):
        from portal.api.throttles import AnonRateThrottle

        AnonRateThrottle().record(request)
    if isinstance(exc, DjangoValidationError):
        detail = exc.message_dict if hasattr(exc, "error_dict") else {"detail": exc.messages}
        exc = exceptions.ValidationError(detail)
    elif isinstance(exc, DjangoPermissionDenied):
        exc = exceptions.PermissionDenied(str(exc) or None)
    return drf_exception_handler(exc, context)


class ContentNegotiation(DefaultContentNegotiation):
    """DRF's negotiation, but ``?format=`` naming a format the endpoint does not offer is
    a 400 ``{"format": [...]}`` (DRF answers 404, which reads as "no such object")."""

    def filter_renderers(self, renderers, format):
        """The renderers of ``format``; 400 naming ``format`` and the offered ones if none."""
        matching = [renderer for renderer in renderers if renderer.format == format]
        if not matching:
            offered = ", ".join(sorted({r.format for r in renderers if r.format}))
            raise exceptions.ValidationError(
                {"format": [f"'{format}' is not offered here; use one of: {offered}."]})
        return matching
