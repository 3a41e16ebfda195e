"""API throttles: DRF's per-user and per-anonymous-IP rates, read from settings at call time.

``settings.API_THROTTLE_RATES`` maps ``user`` and ``anon`` to DRF rates (``"1200/min"``;
``None`` = unthrottled); ``anon`` also counts every failed authentication
(:mod:`portal.api.auth`). The counts live in the ``throttle`` cache (Redis when
``REDIS_URL`` is set, so every web process shares them). A throttled request answers
429 with ``Retry-After`` (seconds) and ``{"detail": ...}``. Client IPs come from DRF's
``NUM_PROXIES`` (``API_NUM_PROXIES``: the number of proxies in front of the portal).
"""

import logging

from django.conf import settings
from django.core.cache import caches
from rest_framework import throttling

logger = logging.getLogger(__name__)


class _SettingsRate:
    """The rate of ``scope`` from ``settings.API_THROTTLE_RATES``, read on each request
    (DRF's own classes freeze the rates at import), counted in the ``throttle`` cache.

    When that cache cannot be reached (Redis down) the request is let through and a
    warning logged: the throttle must not turn a Redis outage into an API outage.
    """

    @property
    def cache(self):
        return caches["throttle"]

    def get_rate(self):
        return settings.API_THROTTLE_RATES.get(self.scope)

    def allow_request(self, request, view):
        try:
            return super().allow_request(request, view)
        except Exception as exc:  # noqa: BLE001 - the cache backend's own errors
            logger.warning("API throttle %s not applied: cache unreachable (%s)", self.scope, exc)
            return True


class UserRateThrottle(_SettingsRate, throttling.UserRateThrottle):
    """Signed-in users (session or token), counted per user id."""


class AnonRateThrottle(_SettingsRate, throttling.AnonRateThrottle):
    """Anonymous requests, counted per client IP: requests to views open to anonymous
    users, and every failed authentication (401) on any view (see :mod:`portal.api.auth`)."""

    def _load(self, request) -> None:
        # The key from the client IP alone: called while authenticating, when
        # request.user (which DRF's get_cache_key reads) is not known yet.
        self.key = self.cache_format % {"scope": self.scope, "ident": self.get_ident(request)}
        self.history = self.cache.get(self.key, [])
        self.now = self.timer()
        while self.history and self.history[-1] <= self.now - self.duration:
            self.history.pop()

    def over_limit(self, request) -> bool:
        """True when the client IP has used up its rate (nothing is counted; False when
        the cache cannot be reached)."""
        if self.rate is None:
            return False
        try:
            self._load(request)
        except Exception as exc:  # noqa: BLE001 - the cache backend's own errors
            logger.warning("API throttle anon not applied: cache unreachable (%s)", exc)
            return False
        return len(self.history) >= self.num_requests

    def record(self, request) -> None:
        """Count one request (a failed authentication) against the client IP."""
        if self.rate is None or self.over_limit(request):
            return
        try:
            self.throttle_success()
        except Exception as exc:  # noqa: BLE001 - the cache backend's own errors
            logger.warning("API throttle anon not counted: cache unreachable (%s)", exc)
