"""``python -m harness.sim``: a simulated GPU cluster on loopback.

Starts together, until SIGINT/SIGTERM:

* the Kubernetes API emulator (``harness.apiserver``), its kubeconfig written
  to ``--kubeconfig``;
* the simulated Kueue (or Volcano) controllers (``harness.sim.controller``)
  acting on what is written to it, through the official client over HTTP;
* the simulated dcgm-exporter ``/metrics`` for the running pods
  (``harness.sim.dcgm.MetricsServer``) on ``--metrics-port``.

Prints ``emulator: <url>``, ``kubeconfig: <path>`` and ``metrics: <url>``, one a
line, once all three serve. ``--speed`` (or ``SIM_SPEED``) runs the clock faster
than real time; ``--backend`` (or ``SCHEDULER_BACKEND``) picks Kueue or Volcano;
``--pools FILE`` gives the GPUs (JSON, see ``controller.pools_from_json``;
required for Volcano).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import threading

from harness.apiserver import EmulatorServer, default_crd_dir
from queues.cluster import KubernetesCluster

from .controller import BACKENDS, SimController, pools_from_json
from .dcgm import MetricsServer


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, start emulator + controller + exporter, run until a signal."""
    parser = argparse.ArgumentParser(prog="python -m harness.sim", description=__doc__.split(
        "\n\n")[0])
    parser.add_argument("--kubeconfig", required=True, help="write the kubeconfig here")
    parser.add_argument("--port", type=int, default=0, help="emulator port (0: a free one)")
    parser.add_argument("--metrics-port", type=int, default=0,
                        help="DCGM exporter port (0: a free one)")
    parser.add_argument("--speed", type=float, default=float(os.environ.get("SIM_SPEED", "1")),
                        help="simulated seconds per wall second (default $SIM_SPEED or 1)")
    parser.add_argument("--backend", choices=BACKENDS,
                        default=os.environ.get("SCHEDULER_BACKEND", "kueue"))
    parser.add_argument("--pools", help="JSON file of node pools (flavor, gpu_resource, gpus, "
                                        "gpus_per_node, gpu_model, node_labels)")
    parser.add_argument("--default-duration", type=float, default=60.0,
                        help="seconds a job without a declared duration runs")
    parser.add_argument("--interval", type=float, default=0.5, help="poll interval (s)")
    parser.add_argument("--crds", default=str(default_crd_dir()))
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="sim: %(levelname)s %(message)s")

    pools = labels = None
    if args.pools:
        with open(args.pools, encoding="utf-8") as handle:
            pools, labels = pools_from_json(json.load(handle))
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    server = EmulatorServer(crd_dir=args.crds, port=args.port).start()
    try:
        path = server.write_kubeconfig(args.kubeconfig)
        controller = SimController(KubernetesCluster(kubeconfig=path), backend=args.backend,
                                   speed=args.speed, node_pools=pools, flavor_labels=labels,
                                   default_duration=args.default_duration)
        with MetricsServer(controller.metrics_text, port=args.metrics_port) as metrics:
            loop = threading.Thread(target=controller.run, args=(stop, args.interval),
                                    name="sim-controller", daemon=True)
            loop.start()
            print(f"emulator: {server.url}\nkubeconfig: {path}\nmetrics: {metrics.url}\n"
                  f"backend: {args.backend}  speed: {args.speed:g}x", flush=True)
            while not stop.wait(0.5):
                pass
            loop.join(timeout=10)
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
