"""Simulated NVIDIA dcgm-exporter series for the pods the scheduler simulator runs.

For every GPU unit a running pod holds (a whole GPU, or a MIG instance), this
renders what dcgm-exporter serves on ``/metrics`` in the Prometheus text format:

* ``DCGM_FI_DEV_GPU_UTIL`` (gauge, percent 0..100), whole GPUs only: the
  exporter has no such series for MIG instances;
* ``DCGM_FI_PROF_GR_ENGINE_ACTIVE`` (gauge, ratio 0..1), whole GPUs and MIG
  instances;
* ``DCGM_FI_DEV_FB_USED`` (gauge, MiB).

Labels as dcgm-exporter's Kubernetes pod mapping writes them: ``gpu`` (device
index on the node), ``UUID``, ``device`` (``nvidia<index>``), ``modelName``,
``Hostname``, ``container``, ``namespace``, ``pod``; MIG instances add
``GPU_I_PROFILE`` (``1g.10gb``) and ``GPU_I_ID``. (Names and help strings from
NVIDIA/dcgm-exporter ``etc/default-counters.csv`` and ``dcp-metrics-included.csv``.)

Activity comes from the job's profile (``SimJob.profile``), deterministic in
``(seed, pod, device, whole simulated second)``:

* ``training``: busy, 0.9 +- 0.05, framebuffer ~85 % used;
* ``notebook``: idle, 0.01 +- 0.01, yet holding its GPUs and ~30 % framebuffer;
* ``inference``: bursty, in 30-second windows a burst (0.6..0.9) with
  probability 0.3, otherwise 0.05..0.15; framebuffer ~50 %.

``MetricsServer`` serves the text on a loopback ``/metrics`` endpoint from a
thread (stdlib ``http.server``), as the demo's stand-in for a Prometheus target.
"""

from __future__ import annotations

import hashlib
import threading
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from queues.schedmodel.core import SimulatorBase

__all__ = ["GpuUnit", "MetricsServer", "activity", "gpu_units", "render_metrics"]

_UUID_NAMESPACE = uuid.UUID("0b7f4a6e-0d1c-4bb9-8a3e-5b2f8f6c1d42")
_BURST_WINDOW_S = 30
_HELP = {
    "DCGM_FI_DEV_GPU_UTIL": "GPU utilization (in %).",
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE": "Ratio of time the graphics engine is active.",
    "DCGM_FI_DEV_FB_USED": "Framebuffer memory used (in MiB).",
}
_FB_SHARE = {"training": 0.85, "notebook": 0.30, "inference": 0.50}


@dataclass(frozen=True)
class GpuUnit:
    """One GPU (or MIG instance) held by one running pod.

    ``gpu``: device index on the node; ``gpu_i_id`` / ``mig_profile``: the MIG
    instance, ``None`` for a whole GPU; ``memory_mib``: framebuffer of the unit;
    ``profile``: the job's activity profile; ``job``: the job key.
    """

    namespace: str
    pod: str
    container: str
    hostname: str
    gpu: int
    uuid: str
    model: str
    memory_mib: int
    profile: str
    job: str
    mig_profile: str | None = None
    gpu_i_id: int | None = None


def gpu_units(sim: SimulatorBase, *, container: str = "main") -> list[GpuUnit]:
    """The GPU units of every running pod of ``sim`` that sits on a ``NodePool``
    (quota-only flavors have no devices to report), in admission order."""
    units: list[GpuUnit] = []
    for record in sim.running():
        pool = sim.nodes.pools.get(record.flavor)
        if pool is None:
            continue
        for placement in record.placements:
            for unit in placement.units:
                gpu, instance = divmod(unit, pool.mig_instances_per_gpu)
                is_mig = pool.mig_profile is not None
                units.append(GpuUnit(
                    namespace=record.job.namespace, pod=placement.pod, container=container,
                    hostname=placement.node, gpu=gpu,
                    uuid="GPU-" + str(uuid.uuid5(_UUID_NAMESPACE, f"{placement.node}/{gpu}")),
                    model=pool.gpu_model, memory_mib=pool.memory_mib,
                    profile=record.job.profile, job=record.key,
                    mig_profile=pool.mig_profile if is_mig else None,
                    gpu_i_id=instance if is_mig else None,
                ))
    return units


def _uniform(*parts: object) -> float:
    """A deterministic number in [0, 1) from ``parts`` (blake2b, not ``hash()``)."""
    digest = hashlib.blake2b("\x1f".join(map(str, parts)).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


def activity(profile: str, *, seed: int, key: str, now: float) -> float:
    """Graphics-engine activity ratio (0..1) of one unit at simulated time ``now``
    (seconds) for ``profile`` (module doc). ``key`` identifies the unit.
    Raises ``ValueError`` for an unknown profile."""
    second = int(now)
    noise = _uniform(seed, key, second)
    if profile == "training":
        value = 0.85 + 0.10 * noise
    elif profile == "notebook":
        value = 0.02 * noise
    elif profile == "inference":
        window = second // _BURST_WINDOW_S
        if _uniform(seed, key, "burst", window) < 0.3:
            value = 0.6 + 0.3 * noise
        else:
            value = 0.05 + 0.10 * noise
    else:
        raise ValueError(f"unknown activity profile {profile!r}")
    return min(1.0, max(0.0, value))


def _labels(unit: GpuUnit) -> str:
    pairs = [("gpu", str(unit.gpu)), ("UUID", unit.uuid), ("device", f"nvidia{unit.gpu}"),
             ("modelName", unit.model), ("Hostname", unit.hostname)]
    if unit.mig_profile is not None:
        pairs += [("GPU_I_PROFILE", unit.mig_profile), ("GPU_I_ID", str(unit.gpu_i_id))]
    pairs += [("container", unit.container), ("namespace", unit.namespace), ("pod", unit.pod)]
    escaped = (value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
               for _, value in pairs)
    return ",".join(f'{name}="{value}"' for (name, _), value in zip(pairs, escaped, strict=True))


def render_metrics(units: Iterable[GpuUnit], *, now: float, seed: int = 0) -> str:
    """The exposition text (``text/plain; version=0.0.4``) for ``units`` at simulated
    time ``now`` (seconds). Same units, ``now`` and ``seed`` give the same text."""
    rows: dict[str, list[str]] = {name: [] for name in _HELP}
    for unit in units:
        key = f"{unit.pod}/{unit.hostname}/{unit.gpu}/{unit.gpu_i_id}"
        ratio = activity(unit.profile, seed=seed, key=key, now=now)
        labels = _labels(unit)
        if unit.mig_profile is None:
            rows["DCGM_FI_DEV_GPU_UTIL"].append(f"DCGM_FI_DEV_GPU_UTIL{{{labels}}} "
                                                f"{round(ratio * 100)}")
        rows["DCGM_FI_PROF_GR_ENGINE_ACTIVE"].append(
            f"DCGM_FI_PROF_GR_ENGINE_ACTIVE{{{labels}}} {ratio:.6f}")
        share = _FB_SHARE[unit.profile] * (0.95 + 0.1 * _uniform(seed, key, "fb", int(now)))
        used = min(unit.memory_mib, round(unit.memory_mib * share))
        rows["DCGM_FI_DEV_FB_USED"].append(f"DCGM_FI_DEV_FB_USED{{{labels}}} {used}")
    out = []
    for name, lines in rows.items():
        out += [f"# HELP {name} {_HELP[name]}", f"# TYPE {name} gauge", *lines]
    return "\n".join(out) + "\n"


class MetricsServer:
    """Serve ``render()`` on ``http://127.0.0.1:<port>/metrics`` from a daemon thread.

    ``render``: a callable returning the exposition text (called per scrape, so it
    may read a live simulator; guard shared state yourself). ``port`` 0 picks a
    free port; ``url`` is set once started. Use as a context manager or call
    ``start()`` / ``stop()``. Any other path answers 404.
    """

    def __init__(self, render: Callable[[], str], *, host: str = "127.0.0.1",
                 port: int = 0) -> None:
        self._render = render
        self._host, self._port = host, port
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.url: str | None = None

    def start(self) -> MetricsServer:
        render = self._render

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                if self.path.split("?")[0] != "/metrics":
                    self.send_error(404)
                    return
                body = render().encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:  # noqa: A002
                return

        self._server = ThreadingHTTPServer((self._host, self._port), Handler)
        self._server.daemon_threads = True
        host, port = self._server.server_address[:2]
        self.url = f"http://{host}:{port}/metrics"
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        name="dcgm-metrics", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._thread.join(timeout=5)
            self._server = None

    def __enter__(self) -> MetricsServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
