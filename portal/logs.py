"""Structured logs: ``LOG_FORMAT=json`` writes one JSON object a line.

Every line carries the context of what it was logged for: ``request_id`` in the web
process (:class:`RequestIdMiddleware`: the caller's ``X-Request-ID`` when it is a
sane token, else a new one; echoed in the response's ``X-Request-ID``), and in
workers ``task_id``, ``task`` and, for tasks about a cluster or a job, ``cluster``
(set by the Celery signal handlers below). :class:`ContextFilter` puts them on each
record, so the plain format can use them too.

A JSON line: ``{"ts": "2026-12-01T21:04:05.123Z", "level": "INFO", "logger": "...",
"message": "...", "request_id": "...", "task_id": "...", "task": "...", "cluster":
"...", "exception": "Traceback ..."}`` (context keys only when set) plus any
``extra={...}`` fields the call passed. With ``LOG_FORMAT=json`` each request also
gets one access line (logger ``portal.request``: method, path, status, duration_ms,
user), and each task run one line (logger ``portal.task``: state, duration_s) with its
context.
"""

from __future__ import annotations

import contextvars
import json
import logging
import re
import time
import uuid
from datetime import UTC, datetime

from celery import signals

request_id_var: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "request_id", default=None)
task_id_var: contextvars.ContextVar[str | None] = contextvars.ContextVar("task_id", default=None)
task_name_var: contextvars.ContextVar[str | None] = contextvars.ContextVar("task", default=None)
cluster_var: contextvars.ContextVar[str | None] = contextvars.ContextVar("cluster", default=None)

CONTEXT = {"request_id": request_id_var, "task_id": task_id_var, "task": task_name_var,
           "cluster": cluster_var}
#: Attributes every LogRecord has: anything else on a record came from ``extra=``.
_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {
    "message", "asctime", *CONTEXT}
_SANE_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")


class ContextFilter(logging.Filter):
    """Adds ``request_id``, ``task_id``, ``task`` and ``cluster`` to each record
    (None when unset, so a plain format string may name them)."""

    def filter(self, record: logging.LogRecord) -> bool:
        for name, var in CONTEXT.items():
            if not hasattr(record, name):
                setattr(record, name, var.get())
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per record (see the module docstring for the keys)."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(
                timespec="milliseconds").replace("+00:00", "Z"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name, var in CONTEXT.items():
            value = getattr(record, name, None) or var.get()
            if value:
                entry[name] = value
        for name, value in vars(record).items():
            if name not in _STANDARD and not name.startswith("_") and name not in entry:
                entry[name] = value
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        if record.stack_info:
            entry["stack"] = self.formatStack(record.stack_info)
        return json.dumps(entry, default=str, ensure_ascii=False)


def json_enabled() -> bool:
    from django.conf import settings

    return getattr(settings, "LOG_FORMAT", "plain") == "json"


class RequestIdMiddleware:
    """Gives each request an id (``X-Request-ID`` in, or a new uuid4 hex) for its logs."""

    access = logging.getLogger("portal.request")

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        given = request.headers.get("X-Request-ID", "")
        request_id = given if _SANE_ID.match(given) else uuid.uuid4().hex
        request.request_id = request_id
        token = request_id_var.set(request_id)
        started = time.monotonic()
        try:
            response = self.get_response(request)
            response["X-Request-ID"] = request_id
            if json_enabled():
                user = getattr(request, "user", None)
                self.access.info(
                    "%s %s %s", request.method, request.path, response.status_code,
                    extra={"method": request.method, "path": request.path,
                           "status": response.status_code,
                           "duration_ms": round((time.monotonic() - started) * 1000, 1),
                           "user": user.get_username() if user is not None
                           and user.is_authenticated else None})
            return response
        finally:
            request_id_var.reset(token)


# ---- Celery: the task's context, and JSON on the worker's own handlers ---------------

_cluster_names: dict[int, str] = {}


def _cluster_name(cluster_id: int) -> str | None:
    if cluster_id not in _cluster_names:
        from portal.models import Cluster

        name = Cluster.objects.filter(pk=cluster_id).values_list("name", flat=True).first()
        if name is None:
            return None
        _cluster_names[cluster_id] = name
    return _cluster_names[cluster_id]


def task_cluster(args, kwargs) -> str | None:
    """The cluster a task is about: its ``cluster_id``, or its ``job_id``'s cluster."""
    kwargs = kwargs or {}
    try:
        if "cluster_id" in kwargs:
            return _cluster_name(int(kwargs["cluster_id"]))
        if "job_id" in kwargs:
            job_id = int(kwargs["job_id"])
        else:
            return None
    except (TypeError, ValueError):
        return None
    from portal.models import Job

    return (Job.objects.filter(pk=job_id).values_list("flavor__cluster__name", flat=True)
            .first())


def _positional(task, args, kwargs) -> dict:
    """Name the task's positional arguments (``reconcile_cluster(3)`` -> cluster_id=3)."""
    import inspect

    named = dict(kwargs or {})
    try:
        params = [p for p in inspect.signature(task.run).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        return named
    for param, value in zip(params, args or (), strict=False):
        named.setdefault(param.name, value)
    return named


_tokens: dict[str, list] = {}


@signals.task_prerun.connect
def _task_context(task_id=None, task=None, args=None, kwargs=None, **_kw) -> None:
    tokens = [task_id_var.set(task_id), task_name_var.set(getattr(task, "name", None))]
    cluster = None
    if task is not None and json_enabled():  # a query for the job's cluster: JSON only
        try:
            cluster = task_cluster(args, _positional(task, args, kwargs))
        except Exception:  # noqa: BLE001 - a log field must never fail the task
            cluster = None
    tokens.append(cluster_var.set(cluster))
    if task_id:
        _tokens[task_id] = tokens
        _started[task_id] = time.monotonic()


_task_log = logging.getLogger("portal.task")
_started: dict[str, float] = {}


@signals.task_postrun.connect
def _task_context_end(task_id=None, task=None, state=None, **_kw) -> None:
    started = _started.pop(task_id, None) if task_id else None
    if json_enabled():
        # One line per task run while its context is still set (Celery's own "succeeded
        # in" line comes after, without it).
        seconds = round(time.monotonic() - started, 3) if started is not None else None
        _task_log.info("%s %s", getattr(task, "name", "task"), state,
                       extra={"state": state, "duration_s": seconds})
    for var, token in zip((task_id_var, task_name_var, cluster_var),
                          _tokens.pop(task_id, []), strict=False):
        try:
            var.reset(token)
        except ValueError:
            var.set(None)


def _json_handlers(logger=None, **_kw) -> None:
    """With ``LOG_FORMAT=json`` the worker's handlers (Celery installs its own on the
    root and task loggers) write JSON with the task context too."""
    if logger is None or not json_enabled():
        return
    for handler in logger.handlers:
        handler.setFormatter(JsonFormatter())
        if not any(isinstance(f, ContextFilter) for f in handler.filters):
            handler.addFilter(ContextFilter())


signals.after_setup_logger.connect(_json_handlers, weak=False)
signals.after_setup_task_logger.connect(_json_handlers, weak=False)
