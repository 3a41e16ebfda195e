"""Structured logs (portal/logs.py): the JSON lines, the request id, the task context."""

import io
import json
import logging

from django.http import HttpResponse
from django.test import RequestFactory

from portal import logs


def capture(formatter: logging.Formatter) -> tuple[logging.Logger, io.StringIO]:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(formatter)
    handler.addFilter(logs.ContextFilter())
    logger = logging.getLogger(f"test.logs.{id(stream)}")
    logger.handlers[:] = [handler]
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    return logger, stream


def lines(stream: io.StringIO) -> list[dict]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_a_json_line_has_the_fields_the_context_and_extras():
    logger, stream = capture(logs.JsonFormatter())
    logger.info("plain %s", "line")
    tokens = [logs.task_id_var.set("t-1"), logs.task_name_var.set("portal.reconcile_cluster"),
              logs.cluster_var.set("gpu-east")]
    try:
        logger.warning("applied %d objects", 3, extra={"writes": 3, "kinds": ["a", "b"]})
    finally:
        for var, token in zip((logs.task_id_var, logs.task_name_var, logs.cluster_var), tokens,
                              strict=True):
            var.reset(token)
    try:
        raise ValueError("boom")
    except ValueError:
        logger.exception("failed")
    first, second, third = lines(stream)
    assert set(first) == {"ts", "level", "logger", "message"}
    assert first["message"] == "plain line" and first["level"] == "INFO"
    assert first["ts"].endswith("Z") and "T" in first["ts"]
    assert second == {**second, "level": "WARNING", "message": "applied 3 objects",
                      "task_id": "t-1", "task": "portal.reconcile_cluster",
                      "cluster": "gpu-east", "writes": 3, "kinds": ["a", "b"]}
    assert "request_id" not in second
    assert third["message"] == "failed"
    assert "ValueError: boom" in third["exception"]


def test_the_request_id_is_taken_or_made_logged_and_echoed(settings):
    settings.LOG_FORMAT = "json"
    logger, stream = capture(logs.JsonFormatter())
    access, access_stream = capture(logs.JsonFormatter())
    seen = []

    def view(request):
        seen.append(logs.request_id_var.get())
        logger.info("inside the view")
        return HttpResponse("ok", status=201)

    middleware = logs.RequestIdMiddleware(view)
    middleware.access = access
    factory = RequestFactory()
    response = middleware(factory.get("/teams/", HTTP_X_REQUEST_ID="req-abc.123"))
    assert response["X-Request-ID"] == "req-abc.123" == seen[0]
    # An insane id (spaces, too long) is replaced by a fresh one.
    response = middleware(factory.post("/api/v1/jobs/", HTTP_X_REQUEST_ID="bad id " * 40))
    made = response["X-Request-ID"]
    assert made == seen[1] and len(made) == 32 and " " not in made
    assert logs.request_id_var.get() is None  # reset after the request
    assert [line["request_id"] for line in lines(stream)] == ["req-abc.123", made]
    first, second = lines(access_stream)
    assert (first["method"], first["path"], first["status"]) == ("GET", "/teams/", 201)
    assert first["request_id"] == "req-abc.123" and first["duration_ms"] >= 0
    assert first["user"] is None
    assert (second["method"], second["request_id"]) == ("POST", made)


def test_plain_format_writes_no_access_line_and_keeps_its_format(settings):
    settings.LOG_FORMAT = "plain"
    access, access_stream = capture(logs.JsonFormatter())
    middleware = logs.RequestIdMiddleware(lambda request: HttpResponse("ok"))
    middleware.access = access
    response = middleware(RequestFactory().get("/"))
    assert response["X-Request-ID"]
    assert access_stream.getvalue() == ""
    assert settings.LOGGING["handlers"]["console"]["formatter"] in ("plain", "json")


def test_settings_refuse_an_unknown_log_format():
    import os
    import subprocess
    import sys

    env = {**os.environ, "LOG_FORMAT": "xml", "DJANGO_SETTINGS_MODULE": "portal.settings"}
    proc = subprocess.run([sys.executable, "-c", "import django; django.setup()"], env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0
    assert "LOG_FORMAT must be 'plain' or 'json'" in proc.stderr
