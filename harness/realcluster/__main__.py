"""``python -m harness.realcluster build|up|down|env|status``.

build            build the pinned components into the cache (nothing when built)
up [--job-seconds N] [--state DIR]
                 start the control plane with KWOK nodes for the demo's GPU flavors
down [--state DIR]
                 stop every component by its recorded PID
env [--state DIR]
                 print ``export`` lines (KUBECONFIG of the portal's ServiceAccount, ...)
status [--state DIR]
                 which components run, with their PIDs
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from harness.realcluster import components


def default_state_dir() -> Path:
    override = os.environ.get("REALCLUSTER_STATE")
    return Path(override) if override else components.cache_root() / "state" / "default"


def demo_pools():
    """KWOK node pools for the demo's GPU flavors (``seed_demo.FLAVORS``)."""
    from harness.realcluster.controlplane import GpuNodePool

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
    import django

    django.setup()
    from portal.management.commands.seed_demo import FLAVORS

    return [GpuNodePool(flavor=name, gpu_resource=resource, gpus=gpus,
                        node_labels={"nvidia.com/gpu.product": product})
            for name, resource, _model, gpus, _cpu, _memory, product in FLAVORS]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.realcluster")
    parser.add_argument("command", choices=["build", "up", "down", "env", "status"])
    parser.add_argument("components", nargs="*", help="build: only these components")
    parser.add_argument("--state", type=Path, default=None, help="state folder")
    parser.add_argument("--force", action="store_true", help="build: rebuild even if cached")
    parser.add_argument("--job-seconds", type=float, default=30.0,
                        help="up: KWOK completes a Job's pods after this long (default 30)")
    parser.add_argument("--no-nodes", action="store_true", help="up: start without KWOK nodes")
    args = parser.parse_args(argv)
    if args.command == "build":
        return components.main_build([*args.components, *(["--force"] if args.force else [])])

    from harness.realcluster.controlplane import ControlPlane, ControlPlaneError

    plane = ControlPlane(args.state or default_state_dir())
    try:
        if args.command == "up":
            plane.up([] if args.no_nodes else demo_pools(), job_seconds=args.job_seconds)
            print(f"use it: eval \"$(python -m harness.realcluster env --state {plane.dir})\"")
        elif args.command == "down":
            plane.down()
        elif args.command == "env":
            for key, value in plane.env().items():
                print(f"export {key}={value}")
        elif args.command == "status":
            running = plane.running()
            for name in ControlPlane.ORDER:
                pid = running.get(name)
                print(f"{name:24} {'pid ' + str(pid) if pid else 'not running'}")
    except (ControlPlaneError, RuntimeError) as exc:
        print(f"[realcluster] FAILED: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
