"""``GET /metrics``: the portal's own metrics in Prometheus's text format.

Protected: a request with ``Authorization: Bearer <METRICS_TOKEN>`` (Prometheus's
``authorization`` scrape option) or from a signed-in staff user; anything else gets
401 (no or wrong credentials) or 403 (signed in, not staff). With ``METRICS_TOKEN``
empty only staff sessions are let in.
"""

import hmac

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET
from prometheus_client.exposition import choose_encoder

from portal.metrics.collector import registry


def _bearer_ok(request: HttpRequest) -> bool:
    token = settings.METRICS_TOKEN
    header = request.headers.get("Authorization", "")
    scheme, _, given = header.partition(" ")
    return bool(token) and scheme.lower() == "bearer" and hmac.compare_digest(
        given.strip().encode(), token.encode())


@never_cache
@require_GET
def metrics(request: HttpRequest) -> HttpResponse:
    """The metric families of :class:`portal.metrics.collector.PortalCollector`."""
    if not _bearer_ok(request):
        user = request.user
        if not user.is_authenticated:
            response = HttpResponse("metrics need a bearer token or a staff sign-in\n",
                                    status=401, content_type="text/plain")
            response["WWW-Authenticate"] = 'Bearer realm="metrics"'
            return response
        if not user.is_staff:
            return HttpResponse("metrics are for staff\n", status=403,
                                content_type="text/plain")
    # Prometheus's text format, or OpenMetrics when the scraper asks for it (Accept).
    encoder, content_type = choose_encoder(request.headers.get("Accept", ""))
    return HttpResponse(encoder(registry()), content_type=content_type)
