"""API throttles: DRF's per-user and per-anonymous-IP rates, read from settings at call time.

``settings.API_THROTTLE_RATES`` maps ``user`` and ``anon`` to DRF rates (``"1200/min"``;
``None`` = unthrottled); ``anon`` also counts every failed authentication
(:mod:`portal.api.auth`). The counts live in the ``throttle`` cache (Redis when
``REDIS_URL`` is set, so every web process shares them). A throttled request answers
429 with ``Retry-After`` (seconds) and ``{"detail": ...}``. Client IPs come from DRF's
``NUM_PROXIES`` (``API_NUM_PROXIES``: the number of proxies in front of the portal).
"""

from django.conf import settings
from django.core.cache import caches
from rest_framework import throttling


class _SettingsRate:
    """The rate of ``scope`` from ``settings.API_THROTTLE_RATES``, read on each request
    (DRF's own classes freeze the rates at import), counted in the ``throttle`` cache."""

    @property
    def cache(self):
        return caches["throttle"]

    def get_rate(self):
        return settings.API_THROTTLE_RATES.get(self.scope)


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
        """True when the client IP has used up its rate (nothing is counted)."""
        if self.rate is None:
            return False
        self._load(request)
        return len(self.history) >= self.num_requests

    def record(self, request) -> None:
        """Count one request (a failed authentication) against the client IP."""
        if self.rate is None or self.over_limit(request):
            return
        self.throttle_success()
