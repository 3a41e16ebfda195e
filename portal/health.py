"""Probes for the database, the Celery broker and page rendering.

Used by ``GET /healthz`` (web side) and the ``portal.worker_health`` task
(worker side). Each probe returns a small JSON-ready dict and never raises.
"""

import time

from django.db import connection


def database_status() -> dict:
    """Probe the default database with ``SELECT 1``.

    Returns ``{"ok": bool, "vendor": str, "latency_ms": float}`` plus ``"error"``
    (the exception text) when unreachable.
    """
    started = time.monotonic()
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except Exception as exc:  # noqa: BLE001 - any failure means "unreachable"
        return {"ok": False, "vendor": connection.vendor, "error": str(exc)}
    return {
        "ok": True,
        "vendor": connection.vendor,
        "latency_ms": round((time.monotonic() - started) * 1000, 2),
    }


def broker_status(timeout_s: float = 2.0) -> dict:
    """Probe the Celery broker by opening a connection (no message is sent).

    ``timeout_s`` bounds the attempt, in seconds. Returns ``{"ok": bool,
    "transport": str}`` plus ``"error"`` when unreachable.
    """
    from portal.celery import app

    conn = app.connection_for_write()
    transport = conn.transport_cls if isinstance(conn.transport_cls, str) else "custom"
    try:
        conn.ensure_connection(max_retries=1, timeout=timeout_s)
    except Exception as exc:  # noqa: BLE001 - any failure means "unreachable"
        return {"ok": False, "transport": transport, "error": str(exc)}
    finally:
        conn.release()
    return {"ok": True, "transport": transport}


def pages_status() -> dict:
    """Render the login page's template, as a page request would (static file URLs included).

    With manifest static storage (``DEBUG=false``) a missing or stale
    ``staticfiles.json`` makes every page answer 500 ("Missing staticfiles
    manifest entry"); this probe fails the same way. Returns ``{"ok": bool}``
    plus ``"error"`` when rendering fails.
    """
    from django.contrib.auth.forms import AuthenticationForm
    from django.template.loader import render_to_string

    try:
        render_to_string("registration/login.html", {"form": AuthenticationForm()})
    except Exception as exc:  # noqa: BLE001 - any failure means pages cannot render
        return {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
    return {"ok": True}
