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

from tests.services import unavailable

MODEL = "NVIDIA H100 80GB HBM3"
MIG_MODEL = "NVIDIA A100-SXM4-80GB"


def dcgm_line(metric: str, value: float | str, *, gpu: str, node: str,
              namespace: str | None = None, pod: str | None = None,
              container: str | None = None, model: str = MODEL, **extra: str) -> str:
    """One exposition line in dcgm-exporter's shape (labels gpu, UUID, device,
    modelName, Hostname, and namespace/pod/container when a pod holds the GPU)."""
    labels = {"gpu": gpu, "UUID": f"GPU-{node}-{gpu}", "device": f"nvidia{gpu}",
              "modelName": model, "Hostname": node}
    if namespace is not None:
        labels["namespace"] = namespace
    if pod is not None:
        labels["pod"] = pod
        labels["container"] = container or "worker"
    labels.update(extra)
    body = ",".join(f'{k}="{v}"' for k, v in labels.items())
    return f"{metric}{{{body}}} {value}"


#: What the integration tests serve, and the figures it implies (see test_utilization.py):
#:   team-a/train (4 GPUs, 2 pods x 2): 75 %, 50 %, 25 % by GPU_UTIL and 0.5 by
#:     GR_ENGINE_ACTIVE on a GPU that also reports GPU_UTIL 90 (the ratio wins) -> busy 2.0
#:   team-a/eval (1 GPU): 150 % only (impossible, dropped) -> no data
#:   team-b/mig-ft (2 MIG instances of one A100): 0.5 and 0.25 -> busy 0.75
#:   one GPU with no pod labels at 25 % -> unattributed, busy 0.25
DCGM_TEXT = "\n".join([
    "# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).",
    "# TYPE DCGM_FI_DEV_GPU_UTIL gauge",
    dcgm_line("DCGM_FI_DEV_GPU_UTIL", 75, gpu="0", node="node-1", namespace="team-a",
              pod="train-0-x2kq9"),
    dcgm_line("DCGM_FI_DEV_GPU_UTIL", 50, gpu="1", node="node-1", namespace="team-a",
              pod="train-0-x2kq9"),
    dcgm_line("DCGM_FI_DEV_GPU_UTIL", 25, gpu="2", node="node-1", namespace="team-a",
              pod="train-1-bz7wm"),
    dcgm_line("DCGM_FI_DEV_GPU_UTIL", 90, gpu="3", node="node-1", namespace="team-a",
              pod="train-1-bz7wm"),
    dcgm_line("DCGM_FI_DEV_GPU_UTIL", 150, gpu="4", node="node-1", namespace="team-a",
              pod="eval-0-lmnpq"),
    dcgm_line("DCGM_FI_DEV_GPU_UTIL", 25, gpu="7", node="node-2"),
    "# HELP DCGM_FI_PROF_GR_ENGINE_ACTIVE Ratio of time the graphics engine is active.",
    "# TYPE DCGM_FI_PROF_GR_ENGINE_ACTIVE gauge",
    dcgm_line("DCGM_FI_PROF_GR_ENGINE_ACTIVE", 0.5, gpu="3", node="node-1",
              namespace="team-a", pod="train-1-bz7wm"),
    dcgm_line("DCGM_FI_PROF_GR_ENGINE_ACTIVE", 0.5, gpu="0", node="node-3",
              namespace="team-b", pod="mig-ft-0-q8wzt", model=MIG_MODEL,
              GPU_I_ID="1", GPU_I_PROFILE="1g.10gb"),
    dcgm_line("DCGM_FI_PROF_GR_ENGINE_ACTIVE", 0.25, gpu="0", node="node-3",
              namespace="team-b", pod="mig-ft-0-q8wzt", model=MIG_MODEL,
              GPU_I_ID="2", GPU_I_PROFILE="1g.10gb"),
    "# HELP DCGM_FI_DEV_FB_USED Framebuffer memory used (in MiB).",
    "# TYPE DCGM_FI_DEV_FB_USED gauge",
    dcgm_line("DCGM_FI_DEV_FB_USED", 40960, gpu="0", node="node-1", namespace="team-a",
              pod="train-0-x2kq9"),
    "",
])


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
            process.terminate()
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=5)
            log.close()
