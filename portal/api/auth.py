"""API authentication: knox's hashed tokens, behind the anonymous-IP throttle.

DRF checks throttles only after authentication and permissions, so a request with a
wrong token (401) or none would never reach the ``anon`` throttle. Here failed
authentications are what the ``anon`` rate counts per client IP
(:func:`portal.api.errors.exception_handler` records each 401), and this class,
first in ``DEFAULT_AUTHENTICATION_CLASSES``, refuses every request from an IP that
used its budget up (429 with ``Retry-After``) before any token is looked at: guessing
tokens costs an attacker a window per few tries.
"""

from drf_spectacular.contrib.knox_auth_token import KnoxTokenScheme
from knox.auth import TokenAuthentication as KnoxTokenAuthentication
from rest_framework import exceptions

from portal.api.throttles import AnonRateThrottle


class TokenAuthentication(KnoxTokenAuthentication):
    """``Authorization: Token <secret>`` (knox: hashed, expiring); refused with 429 while
    the client IP is over its failed-authentication rate."""

    def authenticate(self, request):
        throttle = AnonRateThrottle()
        if throttle.over_limit(request):
            raise exceptions.Throttled(throttle.wait())
        return super().authenticate(request)


class TokenScheme(KnoxTokenScheme):
    """The OpenAPI security scheme of :class:`TokenAuthentication` (knox's, as ``tokenAuth``)."""

    target_class = "portal.api.auth.TokenAuthentication"
    name = "tokenAuth"
