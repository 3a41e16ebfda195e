"""A real Prometheus (Debian's ``prometheus`` package) scraping a DCGM-format endpoint.

:class:`DcgmEndpoint` serves dcgm-exporter text on a loopback port (the test may change
the text while it runs); :func:`start_prometheus` starts ``prometheus`` on a free loopback
port with a temporary config and TSDB folder, scraping that endpoint every second, and
waits until the target is up and the series are queryable. With ``CI=true`` a missing
``prometheus`` binary fails the test (never skips; see :func:`tests.services.unavailable`).
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import requests

from tests.dcgm import DCGM_TEXT
from tests.services import unavailable


class DcgmEndpoint:
    """A loopback HTTP server answering ``GET /metrics`` with :attr:`text`
    (``text/plain; version=0.0.4``, what dcgm-exporter serves). ``url`` is its
    ``/metrics`` address; ``target`` its ``host:port``. Use as a context manager."""

    def __init__(self, text: str = DCGM_TEXT) -> None:
        self.text = text
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep test output clean
                pass

            def do_GET(self):  # noqa: N802 - http.server's name
                if self.path.split("?")[0] != "/metrics":
                    self.send_error(404)
                    return
                body = endpoint.text.encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.target = f"127.0.0.1:{self._httpd.server_address[1]}"
        self.url = f"http://{self.target}/metrics"
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.05,),
                                        daemon=True)

    def __enter__(self) -> DcgmEndpoint:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)


@dataclass
class PrometheusServer:
    """A running Prometheus: ``url`` (http://127.0.0.1:port) and the scraped endpoint."""

    url: str
    endpoint: DcgmEndpoint
    process: subprocess.Popen

    def query(self, promql: str) -> list[dict]:
        """The instant-vector result of ``promql`` now (raises on an API error)."""
        response = requests.post(f"{self.url}/api/v1/query", data={"query": promql}, timeout=5)
        response.raise_for_status()
        return response.json()["data"]["result"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


CONFIG = """\
global:
  scrape_interval: 1s
  scrape_timeout: 900ms
  evaluation_interval: 1s
scrape_configs:
  - job_name: dcgm
    honor_labels: true
    metrics_path: /metrics
    static_configs:
      - targets: ["{target}"]
"""


def stop_prometheus(process: subprocess.Popen, log) -> None:
    """Stop a Prometheus started by a test (SIGTERM, SIGKILL after 15 s) and close its log."""
    process.terminate()
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=5)
    log.close()


@contextmanager
def start_prometheus(endpoint: DcgmEndpoint, *, ready_timeout: float = 60.0
                     ) -> Iterator[PrometheusServer]:
    """Run ``prometheus`` on a free loopback port scraping ``endpoint`` every second.

    Temporary config and TSDB folder (removed afterwards); the process is terminated on
    exit. Waits until the target is ``up`` and ``DCGM_FI_DEV_GPU_UTIL`` has series.
    Fails (``CI=true``) or skips when ``prometheus`` is not installed; fails when it does
    not become ready within ``ready_timeout`` seconds (with its log).
    """
    binary = shutil.which("prometheus")
    if binary is None:
        unavailable("prometheus is not installed (apt-get install prometheus; .ci/run does)")
    with tempfile.TemporaryDirectory(prefix="prom-") as tmp:
        folder = Path(tmp)
        (folder / "prometheus.yml").write_text(CONFIG.format(target=endpoint.target))
        port = _free_port()
        log = (folder / "prometheus.log").open("w+")
        process = subprocess.Popen(  # noqa: S603 - our own binary and arguments
            [binary, f"--config.file={folder / 'prometheus.yml'}",
             f"--storage.tsdb.path={folder / 'data'}",
             f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"],
            stdout=log, stderr=subprocess.STDOUT, cwd=folder,
        )
        server = PrometheusServer(f"http://127.0.0.1:{port}", endpoint, process)
        try:
            deadline = time.monotonic() + ready_timeout
            while True:
                if process.poll() is not None or time.monotonic() > deadline:
                    log.seek(0)
                    import pytest

                    pytest.fail(f"prometheus did not become ready (exit {process.poll()}):\n"
                                f"{log.read()[-4000:]}")
                try:
                    up = server.query('up{job="dcgm"} == 1')
                    ready = bool(up) and bool(server.query("DCGM_FI_DEV_GPU_UTIL"))
                except requests.RequestException:
                    ready = False
                if ready:
                    break
                time.sleep(0.2)
            yield server
        finally:
            stop_prometheus(process, log)
