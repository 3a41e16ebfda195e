"""``python -m harness.apiserver``: run the emulator until interrupted."""

from __future__ import annotations

import argparse
import signal
import sys
import threading

from .server import EmulatorServer, default_crd_dir


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, start the server, print its URL, serve until SIGINT/SIGTERM."""
    parser = argparse.ArgumentParser(prog="python -m harness.apiserver",
                                     description="Kubernetes API emulator on loopback")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--crds", default=str(default_crd_dir()),
                        help="folder of CRD YAML files (default: %(default)s)")
    parser.add_argument("--kubeconfig", help="write a kubeconfig for the server here")
    parser.add_argument("--token", help="bearer token to require (default: random)")
    args = parser.parse_args(argv)

    server = EmulatorServer(crd_dir=args.crds, host=args.host, port=args.port,
                            token=args.token).start()
    if args.kubeconfig:
        server.write_kubeconfig(args.kubeconfig)
    print(server.url, flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        while not stop.wait(0.5):  # short waits so signal handlers run promptly
            pass
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
