"""``manage.py demo`` (what ``make demo`` runs): the whole living product on the embedded default.

On SQLite and the filesystem broker, as child processes: a simulated GPU cluster
(``python -m queues.sim``: the Kubernetes API emulator, the simulated Kueue or
Volcano controllers, a dcgm-exporter ``/metrics``), Prometheus scraping it when
``DEMO_PROMETHEUS=1`` and a ``prometheus`` binary is installed (otherwise the
portal reads the exporter directly through ``DCGM_EXPORTER_URL``), a Celery
worker and beat (jobs sync every ``JOBS_SYNC_INTERVAL_SECONDS``, 3 s here), and
the job stream (``manage.py demo_jobs``; ``DEMO_JOBS=0`` leaves it out). The
demo world is seeded (``seed_demo``) on a cluster whose backend is
``SCHEDULER_BACKEND`` and reconciled onto the simulated cluster before the web
server starts. ``SIM_SPEED`` runs the cluster's clock faster. Ctrl-C (SIGINT) or
SIGTERM stops every process it started. A child that dies on its own (a crashed
worker, the simulated cluster gone) stops the whole demo with its name and exit
code and exit status 1, rather than leaving a portal that serves but never moves.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

#: Seconds between job syncs in the demo (the product default is 15 s).
DEMO_USAGE_COLLECT_SECONDS = "20"
DEMO_JOBS_SYNC_SECONDS = "3"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Command(BaseCommand):
    """Start the simulated cluster, web, worker, beat and the job stream for a local demo."""

    help = ("Migrate, seed, start a simulated GPU cluster, a worker, beat and a stream of jobs, "
            "and serve on 127.0.0.1:PORT.")

    def add_arguments(self, parser) -> None:
        """``--port`` (default: $PORT or 8000) and ``--no-worker``."""
        parser.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8000")))
        parser.add_argument("--no-worker", action="store_true",
                            help="serve the web only (no cluster, worker, beat or jobs)")

    def handle(self, *args, port: int, no_worker: bool, **options) -> None:
        """Run until interrupted; always terminate the children on the way out."""
        var = Path(settings.VAR_DIR)
        var.mkdir(parents=True, exist_ok=True)
        call_command("migrate", interactive=False, verbosity=0)
        call_command("seed_demo")
        # SIGTERM (e.g. from a supervisor) unwinds like Ctrl-C, so children are stopped too;
        # the watchdog sends SIGTERM after recording which child died (exit status 1 then).
        died: list[str] = []
        stopping = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: (stopping.set(), sys.exit(1 if died else 0)))

        def interrupted(*_):
            stopping.set()  # Ctrl-C reaches the children too: their exit is expected now
            raise KeyboardInterrupt

        signal.signal(signal.SIGINT, interrupted)
        children: list[subprocess.Popen] = []
        lines: list[str] = []
        try:
            if not no_worker:
                env = self._start_cluster(var, children, lines)
                self._reconcile()
                celery = [sys.executable, "-m", "celery", "-A", "portal"]
                schedule = var / "celerybeat-schedule"
                children.append(subprocess.Popen(
                    [*celery, "worker", "--loglevel=WARNING", "--pool=threads"], env=env))
                children.append(subprocess.Popen(
                    [*celery, "beat", "--loglevel=WARNING", f"--schedule={schedule}"], env=env))
                if os.environ.get("DEMO_JOBS", "1") != "0":
                    children.append(subprocess.Popen(
                        [sys.executable, "manage.py", "demo_jobs"], env=env,
                        cwd=settings.BASE_DIR))
                    lines.append("jobs: a stream of demo jobs (DEMO_JOBS=0 to leave it out)")
            threading.Thread(target=self._watch, args=(children, died, stopping),
                             daemon=True, name="demo-watchdog").start()
            url = f"http://127.0.0.1:{port}/"
            self.stdout.write("\n".join(lines))
            self.stdout.write(self.style.SUCCESS(f"\nThe portal is at {url}  (Ctrl-C stops it)\n"))
            call_command("runserver", f"127.0.0.1:{port}", use_reloader=False)
        finally:
            stopping.set()
            for child in children:
                if child.poll() is None:
                    child.send_signal(signal.SIGTERM)
            for child in children:
                try:
                    child.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    child.kill()
                    child.wait()

    def _watch(self, children: list, died: list, stopping: threading.Event) -> None:
        """Every second: if a child exited while the demo is not stopping, say which
        (its command line and exit code), record it in ``died`` and SIGTERM ourselves
        so the ``finally`` of :meth:`handle` stops the others."""
        while not stopping.wait(1.0):
            for child in children:
                code = child.poll()
                if code is not None and not stopping.is_set() and not died:
                    name = " ".join(str(a) for a in child.args[-3:])
                    died.append(name)
                    self.stderr.write(f"demo: a child process exited on its own ({name}: exit "
                                      f"code {code}); stopping the demo.")
                    os.kill(os.getpid(), signal.SIGTERM)
                    return

    # ------------------------------------------------------------------ the cluster

    def _start_cluster(self, var: Path, children: list, lines: list) -> dict:
        """Start ``python -m queues.sim`` (and Prometheus), point this process and the
        children's environment at them; returns that environment."""
        from portal.models import Cluster, GpuFlavor

        cluster = Cluster.objects.get(name="demo")
        pools = [{"flavor": f.name, "gpu_resource": f.gpu_resource, "gpus": f.physical_gpus,
                  "gpus_per_node": f.gpus_per_node, "gpu_model": f.gpu_model,
                  "node_labels": f.node_labels}
                 for f in GpuFlavor.objects.filter(cluster=cluster)]
        pools_file = var / "sim-pools.json"
        pools_file.write_text(json.dumps(pools, indent=2))
        kubeconfig = var / "kubeconfig"
        sim = subprocess.Popen(
            [sys.executable, "-m", "queues.sim", "--kubeconfig", str(kubeconfig),
             "--backend", cluster.backend, "--pools", str(pools_file),
             "--speed", os.environ.get("SIM_SPEED", "1")],
            stdout=subprocess.PIPE, text=True, cwd=settings.BASE_DIR)
        children.append(sim)
        urls = {}
        deadline = time.monotonic() + 60
        while "metrics" not in urls:
            line = sim.stdout.readline()
            if not line or time.monotonic() > deadline:
                raise CommandError("the simulated cluster did not start (python -m queues.sim)")
            key, _, value = line.partition(": ")
            urls[key.strip()] = value.strip()
            lines.append(f"cluster {line.rstrip()}")
        env = dict(os.environ, KUBECONFIG=str(kubeconfig), KUBE_CONTEXT="",
                   DCGM_EXPORTER_URL=urls["metrics"],
                   JOBS_SYNC_INTERVAL_SECONDS=os.environ.get("JOBS_SYNC_INTERVAL_SECONDS",
                                                             DEMO_JOBS_SYNC_SECONDS),
                   # Utilization pages have data within a minute, not after 5.
                   USAGE_COLLECT_INTERVAL_SECONDS=os.environ.get(
                       "USAGE_COLLECT_INTERVAL_SECONDS", DEMO_USAGE_COLLECT_SECONDS))
        prometheus = shutil.which("prometheus")
        if os.environ.get("DEMO_PROMETHEUS") == "1" and prometheus:
            env["PROMETHEUS_URL"] = self._start_prometheus(prometheus, var, urls["metrics"],
                                                           children)
            lines.append(f"prometheus: {env['PROMETHEUS_URL']} (scraping the exporter)")
        else:
            env["PROMETHEUS_URL"] = ""
        os.environ.update({k: env[k] for k in ("KUBECONFIG", "KUBE_CONTEXT", "DCGM_EXPORTER_URL",
                                               "PROMETHEUS_URL")})
        settings.KUBECONFIG, settings.KUBE_CONTEXT = str(kubeconfig), ""
        settings.DCGM_EXPORTER_URL, settings.PROMETHEUS_URL = urls["metrics"], env[
            "PROMETHEUS_URL"]
        return env

    def _start_prometheus(self, binary: str, var: Path, target: str, children: list) -> str:
        """Prometheus on a free loopback port scraping ``target`` every 15 s; its URL."""
        host = target.split("//", 1)[1].split("/", 1)[0]
        config = var / "prometheus.yml"
        config.write_text(
            "global: {scrape_interval: 15s}\nscrape_configs:\n"
            f"- job_name: dcgm\n  static_configs: [{{targets: ['{host}']}}]\n")
        port = _free_port()
        children.append(subprocess.Popen(
            [binary, f"--config.file={config}", f"--storage.tsdb.path={var / 'prometheus'}",
             f"--web.listen-address=127.0.0.1:{port}"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        return f"http://127.0.0.1:{port}"

    def _reconcile(self) -> None:
        """Write the seeded world onto the simulated cluster now (the worker's resync
        would do it within 30 s)."""
        from portal.models import Cluster
        from portal.services.reconcile import cluster_reconcile

        for cluster in Cluster.objects.all():
            result = cluster_reconcile(cluster_id=cluster.pk)
            if result is not None and getattr(result, "failed", None):
                self.stderr.write(f"reconcile of {cluster.name}: {len(result.failed)} failed")
