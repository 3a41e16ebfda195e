"""PrometheusClient against a real HTTP server on 127.0.0.1 serving canned API answers."""

import json
import threading
import time
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs

import pytest

from queues.metrics import (
    PodAllocation,
    PrometheusClient,
    PrometheusError,
    fetch_samples,
    samples_from_vector,
    utilization,
)

pytestmark = pytest.mark.integration

VECTOR = {
    "status": "success",
    "data": {
        "resultType": "vector",
        "result": [
            {"metric": {"__name__": "DCGM_FI_DEV_GPU_UTIL", "gpu": "0", "Hostname": "n1",
                        "namespace": "team-a", "pod": "train-0-x2kq9"},
             "value": [1700000000, "75"]},
        ],
    },
    "warnings": ["some series were dropped"],
}
MATRIX = {
    "status": "success",
    "data": {"resultType": "matrix", "result": [
        {"metric": {"gpu": "0"}, "values": [[1700000000, "1"], [1700000060, "2"]]},
    ]},
}
BAD_DATA = {"status": "error", "errorType": "bad_data",
            "error": '1:5: parse error: unexpected "]"'}


class _Handler(BaseHTTPRequestHandler):
    # (path, query) -> (status, content type, body); query None matches any query
    routes: dict = {}
    requests: list = []

    def log_message(self, *args):  # keep pytest output clean
        pass

    def do_POST(self):
        length = int(self.headers.get("Content-Length", 0))
        form = {k: v[0] for k, v in parse_qs(self.rfile.read(length).decode()).items()}
        type(self).requests.append((self.path, form))
        query = form.get("query")
        route = self.routes.get((self.path, query)) or self.routes.get((self.path, None))
        if route is None:
            route = (404, "text/plain", "not found")
        status, ctype, body = route
        if callable(body):
            body = body()
        payload = body if isinstance(body, str) else json.dumps(body)
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(payload.encode())))
        self.end_headers()
        self.wfile.write(payload.encode())


@pytest.fixture
def server():
    handler = type("Handler", (_Handler,), {"routes": {}, "requests": []})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield handler, f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)


def test_instant_query_posts_form_and_parses_vector(server):
    handler, url = server
    handler.routes[("/api/v1/query", None)] = (200, "application/json", VECTOR)
    client = PrometheusClient(url + "/", timeout=5)
    at = datetime(2023, 11, 14, 22, 13, 20, tzinfo=UTC)
    result = client.instant_query("DCGM_FI_DEV_GPU_UTIL", at)
    assert result.result_type == "vector"
    assert result.warnings == ("some series were dropped",)
    assert handler.requests == [
        ("/api/v1/query", {"query": "DCGM_FI_DEV_GPU_UTIL", "time": "1700000000.0"})
    ]
    (sample,) = samples_from_vector(result)
    assert sample.metric == "DCGM_FI_DEV_GPU_UTIL"
    assert sample.value == 75.0
    assert sample.labels["pod"] == "train-0-x2kq9"


def test_range_query_sends_start_end_step(server):
    handler, url = server
    handler.routes[("/api/v1/query_range", None)] = (200, "application/json", MATRIX)
    client = PrometheusClient(url, timeout=5)
    result = client.range_query("up", 1700000000, 1700000060, timedelta(seconds=30))
    assert result.result_type == "matrix"
    assert result.result[0]["values"][1] == [1700000060, "2"]
    assert handler.requests[0][1] == {
        "query": "up", "start": "1700000000.0", "end": "1700000060.0", "step": "30.0"
    }


def test_range_query_argument_checks_are_local():
    client = PrometheusClient("http://127.0.0.1:9")  # never contacted
    with pytest.raises(ValueError, match="step"):
        client.range_query("up", 0, 10, 0)
    with pytest.raises(ValueError, match="before start"):
        client.range_query("up", 10, 0, 1)
    with pytest.raises(ValueError, match="naive"):
        client.instant_query("up", datetime(2024, 1, 1))  # naive on purpose


def test_promql_error_carries_type_and_message(server):
    handler, url = server
    handler.routes[("/api/v1/query", None)] = (400, "application/json", BAD_DATA)
    with pytest.raises(PrometheusError) as info:
        PrometheusClient(url, timeout=5).instant_query("rate(x[5m]")
    err = info.value
    assert err.error_type == "bad_data"
    assert err.message == '1:5: parse error: unexpected "]"'
    assert err.status_code == 400
    assert "bad_data" in str(err)


def test_execution_error_with_http_200_is_still_an_error(server):
    handler, url = server
    body = {"status": "error", "errorType": "execution", "error": "query timed out"}
    handler.routes[("/api/v1/query", None)] = (422, "application/json", body)
    with pytest.raises(PrometheusError) as info:
        PrometheusClient(url, timeout=5).instant_query("up")
    assert (info.value.error_type, info.value.status_code) == ("execution", 422)


def test_non_json_http_error(server):
    handler, url = server
    handler.routes[("/api/v1/query", None)] = (502, "text/html", "<html>Bad Gateway</html>")
    with pytest.raises(PrometheusError) as info:
        PrometheusClient(url, timeout=5).instant_query("up")
    assert info.value.error_type == "http"
    assert info.value.status_code == 502
    assert "Bad Gateway" in info.value.message


def test_success_without_data_is_invalid(server):
    handler, url = server
    handler.routes[("/api/v1/query", None)] = (200, "application/json", {"status": "success"})
    with pytest.raises(PrometheusError, match="invalid_response"):
        PrometheusClient(url, timeout=5).instant_query("up")


def test_connection_refused():
    # bind then close a port so that nothing listens on it
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(PrometheusError) as info:
        PrometheusClient(f"http://127.0.0.1:{port}", timeout=2).instant_query("up")
    assert info.value.error_type == "connection"
    assert info.value.status_code is None


def test_timeout(server):
    handler, url = server

    def slow():
        time.sleep(1.0)
        return VECTOR

    handler.routes[("/api/v1/query", None)] = (200, "application/json", slow)
    with pytest.raises(PrometheusError) as info:
        PrometheusClient(url, timeout=0.2).instant_query("up")
    assert info.value.error_type == "timeout"


def test_fetch_samples_then_utilization_end_to_end(server):
    handler, url = server

    def vector(*series):
        return {"status": "success", "data": {"resultType": "vector", "result": [
            {"metric": labels, "value": [1700000000, value]} for labels, value in series
        ]}}

    empty = vector()
    a = {"gpu": "0", "Hostname": "n1", "namespace": "team-a", "pod": "train-0-x2kq9"}
    b = {"gpu": "1", "Hostname": "n1", "namespace": "team-a", "pod": "train-1-bz7wm"}
    routes = handler.routes
    routes[("/api/v1/query", None)] = (200, "application/json", empty)
    routes[("/api/v1/query", "avg_over_time(DCGM_FI_DEV_GPU_UTIL[5m])")] = (
        200, "application/json", vector((a, "80"), (b, "NaN")))
    routes[("/api/v1/query", "avg_over_time(DCGM_FI_PROF_GR_ENGINE_ACTIVE[5m])")] = (
        200, "application/json", vector((b, "0.4")))

    samples = fetch_samples(PrometheusClient(url, timeout=5), time=1700000000)
    assert len(handler.requests) == 6  # one query per known metric name
    report = utilization(samples, allocations=[
        PodAllocation("team-a", "train-0-x2kq9", 1), PodAllocation("team-a", "train-1-bz7wm", 1),
    ])
    (row,) = report.jobs
    # gpu 0: 80 % -> 0.8; gpu 1: NaN GPU_UTIL dropped, GR_ENGINE_ACTIVE 0.4 used
    assert row.busy_gpu_equivalents == pytest.approx(1.2)
    assert row.coverage == "2 of 2 allocated GPUs reporting"
    assert report.dropped == {"DCGM_FI_DEV_GPU_UTIL": 1}
