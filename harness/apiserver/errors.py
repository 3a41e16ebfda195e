"""Kubernetes ``Status`` errors raised by the emulator's store and handlers."""

from __future__ import annotations

from typing import Any

_REASON_FOR_CODE = {
    400: "BadRequest",
    404: "NotFound",
    405: "MethodNotAllowed",
    409: "Conflict",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
}


class ApiError(Exception):
    """An error the emulator answers with a ``v1 Status`` body.

    ``code`` is the HTTP status code; ``reason`` the Kubernetes StatusReason
    (NotFound, AlreadyExists, Conflict, Invalid, BadRequest, MethodNotAllowed, ...);
    ``details`` the ``Status.details`` dict (name, group, kind, causes).
    """

    def __init__(
        self,
        code: int,
        message: str,
        *,
        reason: str | None = None,
        details: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.reason = reason or _REASON_FOR_CODE.get(code, "Unknown")
        self.details = details or {}
        self.headers = headers or {}

    def to_status(self) -> dict[str, Any]:
        """Return the ``Status`` object (a JSON-ready dict) for this error."""
        status: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.details:
            status["details"] = self.details
        return status


def _details(name: str | None, group: str, kind: str, **extra: Any) -> dict[str, Any]:
    details: dict[str, Any] = {"group": group, "kind": kind}
    if name:
        details["name"] = name
    details.update(extra)
    return details


def not_found(plural: str, group: str, name: str) -> ApiError:
    """404 ``<plural>[.<group>] "<name>" not found`` like the real API server."""
    qualified = f"{plural}.{group}" if group else plural
    return ApiError(
        404, f'{qualified} "{name}" not found', reason="NotFound",
        details=_details(name, group, plural),
    )


def already_exists(plural: str, group: str, name: str) -> ApiError:
    """409 AlreadyExists for a create of an existing name."""
    qualified = f"{plural}.{group}" if group else plural
    return ApiError(
        409, f'{qualified} "{name}" already exists', reason="AlreadyExists",
        details=_details(name, group, plural),
    )


def conflict(plural: str, group: str, name: str, why: str) -> ApiError:
    """409 Conflict for an optimistic-concurrency failure on ``name``."""
    qualified = f"{plural}.{group}" if group else plural
    return ApiError(
        409, f'Operation cannot be fulfilled on {qualified} "{name}": {why}',
        reason="Conflict", details=_details(name, group, plural),
    )


def invalid(kind: str, group: str, name: str, causes: list[dict[str, str]]) -> ApiError:
    """422 Invalid; ``causes`` are ``{reason, message, field}`` dicts."""
    qualified = f"{kind}.{group}" if group else kind
    summary = ", ".join(f"{c['field']}: {c['message']}" for c in causes)
    if len(causes) > 1:
        summary = f"[{summary}]"
    return ApiError(
        422, f'{qualified} "{name}" is invalid: {summary}', reason="Invalid",
        details=_details(name, group, kind, causes=causes),
    )


def bad_request(message: str) -> ApiError:
    """400 BadRequest with ``message``."""
    return ApiError(400, message, reason="BadRequest")
