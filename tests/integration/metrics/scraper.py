"""A real Prometheus (Debian's ``prometheus``) scraping the portal's ``/metrics``.

Like :mod:`tests.integration.prometheus` (which scrapes a DCGM endpoint), on a free
loopback port with a temporary config and TSDB, scraping every second with the bearer
token the portal expects; waits until the target is up.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

import pytest
import requests

from tests.integration.prometheus import stop_prometheus
from tests.services import unavailable

JOB = "gpu-quota-portal"
CONFIG = """\
global:
  scrape_interval: 1s
  scrape_timeout: 900ms
scrape_configs:
  - job_name: {job}
    metrics_path: /metrics
    authorization:
      type: Bearer
      credentials: {token}
    static_configs:
      - targets: ["{target}"]
"""


@dataclass
class Prometheus:
    url: str
    process: subprocess.Popen

    def query(self, promql: str) -> list[dict]:
        response = requests.post(f"{self.url}/api/v1/query", data={"query": promql}, timeout=5)
        response.raise_for_status()
        return response.json()["data"]["result"]

    def value(self, promql: str) -> float | None:
        """The single sample of ``promql`` now (None when the result is empty)."""
        result = self.query(promql)
        assert len(result) <= 1, f"{promql} has {len(result)} series: {result}"
        return float(result[0]["value"][1]) if result else None

    def eventually(self, promql: str, expected: float, timeout: float = 20.0) -> None:
        """Wait until ``promql`` evaluates to ``expected`` (scrapes are 1 s apart)."""
        deadline = time.monotonic() + timeout
        got = None
        while time.monotonic() < deadline:
            got = self.value(promql)
            if got is not None and abs(got - expected) < 1e-9:
                return
            time.sleep(0.25)
        pytest.fail(f"{promql} = {got}, expected {expected} (within {timeout:g} s)")

    def target(self) -> dict:
        response = requests.get(f"{self.url}/api/v1/targets", timeout=5)
        response.raise_for_status()
        return response.json()["data"]["activeTargets"][0]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def scraping(target: str, token: str, *, ready_timeout: float = 60.0) -> Iterator[Prometheus]:
    """Prometheus scraping ``http://<target>/metrics`` with ``token``, until the block ends."""
    binary = shutil.which("prometheus")
    if binary is None:
        unavailable("prometheus is not installed (apt-get install prometheus; .ci/run does)")
    with tempfile.TemporaryDirectory(prefix="prom-portal-") as tmp:
        folder = Path(tmp)
        (folder / "prometheus.yml").write_text(CONFIG.format(job=JOB, token=token,
                                                             target=target))
        port = _free_port()
        log = (folder / "prometheus.log").open("w+")
        process = subprocess.Popen(  # noqa: S603 - our own binary and arguments
            [binary, f"--config.file={folder / 'prometheus.yml'}",
             f"--storage.tsdb.path={folder / 'data'}",
             f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"],
            stdout=log, stderr=subprocess.STDOUT, cwd=folder,
        )
        server = Prometheus(f"http://127.0.0.1:{port}", process)
        try:
            deadline = time.monotonic() + ready_timeout
            while True:
                if process.poll() is not None or time.monotonic() > deadline:
                    log.seek(0)
                    detail = ""
                    with suppress(requests.RequestException, IndexError, KeyError):
                        detail = str(server.target())
                    pytest.fail(f"prometheus never scraped {target} (exit {process.poll()}): "
                                f"{detail}\n{log.read()[-4000:]}")
                try:
                    if server.query(f'up{{job="{JOB}"}} == 1'):
                        break
                except requests.RequestException:
                    pass
                time.sleep(0.2)
            yield server
        finally:
            stop_prometheus(process, log)
