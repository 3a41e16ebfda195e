"""``GET /healthz``: database and broker reachability as JSON."""

from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from portal.health import broker_status, database_status


@never_cache
@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    """Answer 200 when the database and the broker are reachable, else 503.

    Body: ``{"status": "ok"|"degraded", "database": {...}, "broker": {...}}``;
    each part has ``ok`` and, when down, ``error``. No authentication: load
    balancers and orchestrators call it.
    """
    database = database_status()
    broker = broker_status()
    healthy = database["ok"] and broker["ok"]
    return JsonResponse(
        {"status": "ok" if healthy else "degraded", "database": database, "broker": broker},
        status=200 if healthy else 503,
    )
