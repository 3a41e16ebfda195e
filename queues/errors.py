"""Cluster error types, free of any ``kubernetes`` import.

Raised by :mod:`queues.cluster` and recorded by :mod:`queues.reconcile`;
code that only handles them (the reconciler, Celery tasks, fakes in tests)
imports them from here.
"""

from __future__ import annotations

__all__ = ["ClusterError", "PermanentError", "TransientError"]


class ClusterError(Exception):
    """A request to the cluster failed.

    ``status``: HTTP status (``None`` for transport errors); ``reason``: the
    Kubernetes ``Status.reason`` (``"Invalid"``, ``"Conflict"``...) or the
    exception class name; ``message``: the API server's message;
    ``retry_after``: seconds the server asked the client to wait before
    retrying (its ``Retry-After`` header, sent with 429 and some 503s), or
    ``None``.
    """

    def __init__(self, message: str, *, status: int | None = None, reason: str = "",
                 retry_after: float | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.reason = reason
        self.retry_after = retry_after


class TransientError(ClusterError):
    """A failure worth retrying with backoff (409, 429, 5xx, timeout, connection error)."""


class PermanentError(ClusterError):
    """A failure that retrying cannot fix (400, 403, 404 where unexpected, 422 Invalid)."""
