"""``GET /healthz``: can this process serve? Database, broker and pages, as JSON."""

import logging

from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from portal.health import broker_status, database_status, pages_status

logger = logging.getLogger(__name__)


@never_cache
@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    """Answer 200 when the database and the broker are reachable and pages render, else 503.

    Body: ``{"status": "ok"|"degraded", "checks": {"database": "ok"|"down",
    "broker": "ok"|"down", "pages": "ok"|"down"}}``. No authentication (load
    balancers and orchestrators call it), so the body names no vendor, host or
    error text: a failing check's error goes to the log (``portal.views.health``).
    """
    results = {"database": database_status(), "broker": broker_status(),
               "pages": pages_status()}
    for name, result in results.items():
        if not result["ok"]:
            logger.warning("healthz: %s check failed: %s", name, result.get("error", ""))
    healthy = all(result["ok"] for result in results.values())
    return JsonResponse(
        {"status": "ok" if healthy else "degraded",
         "checks": {name: "ok" if result["ok"] else "down" for name, result in results.items()}},
        status=200 if healthy else 503,
    )
