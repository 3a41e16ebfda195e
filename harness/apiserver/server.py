"""The HTTP transport: a ThreadingHTTPServer on loopback in front of an Emulator."""

from __future__ import annotations

import contextlib
import json
import logging
import secrets
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import yaml

from . import kueue_visibility
from .app import SEED_NAMESPACES, Emulator, GetHandler
from .controls import Counters, Faults
from .store import Store

log = logging.getLogger(__name__)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body go out in two writes; with Nagle's algorithm on, the
    # second waits for the client's delayed ACK (~40 ms per request on Linux).
    # TCP_NODELAY, as Go's net/http (the real API server) sets by default.
    disable_nagle_algorithm = True
    server: _Server

    def _serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        headers = {k.lower(): v for k, v in self.headers.items()}
        resp = self.server.emulator.handle(self.command, self.path, headers, body)
        if resp.drop:
            self.close_connection = True
            with contextlib.suppress(OSError):
                self.connection.shutdown(socket.SHUT_RDWR)
            return
        payload = b"" if resp.body is None else json.dumps(resp.body).encode()
        self.send_response(resp.code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        for key, value in resp.headers.items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(payload)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _serve

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib name
        log.debug("%s %s", self.address_string(), format % args)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, addr: tuple[str, int], emulator: Emulator) -> None:
        super().__init__(addr, _Handler)
        self.emulator = emulator


class EmulatorServer:
    """A Kubernetes API emulator listening on ``host:port`` (port 0 = any free port).

    ``crd_dir``: CRD YAML folder (None = ``<repo>/../shared/crds``); ``load_crds=False``
    serves only the built-in kinds. ``token``:
    bearer token clients must send (default: a random one, written into the
    kubeconfig). Use :meth:`start`/:meth:`stop` or ``with EmulatorServer(...) as s``.
    Thread-safe.
    """

    def __init__(self, crd_dir: str | Path | None = None, *, host: str = "127.0.0.1",
                 port: int = 0, token: str | None = None, load_crds: bool = True,
                 seed_namespaces: tuple[str, ...] = SEED_NAMESPACES) -> None:
        if crd_dir is None and load_crds:
            crd_dir = default_crd_dir()
        self.token = token or secrets.token_hex(16)
        self.emulator = Emulator(str(crd_dir) if load_crds else None, token=self.token,
                                 seed_namespaces=seed_namespaces)
        kueue_visibility.install(self.emulator)
        self._user_tokens: dict[str, str] = {}  # user name -> bearer token (add_user)
        self._host, self._port = host, port
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle

    def start(self) -> EmulatorServer:
        """Bind and serve in a daemon thread; returns self. Raises OSError if busy."""
        if self._server is None:
            self._server = _Server((self._host, self._port), self.emulator)
            self._thread = threading.Thread(target=self._server.serve_forever,
                                            name="k8s-emulator", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket (idempotent)."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> EmulatorServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- accessors

    @property
    def url(self) -> str:
        """``http://host:port`` of the running server. Raises RuntimeError if stopped."""
        if self._server is None:
            raise RuntimeError("emulator is not running")
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def faults(self) -> Faults:
        """Injected faults: ``.add(method, path, status, count=, delay=, drop=, ...)``."""
        return self.emulator.faults

    @property
    def counters(self) -> Counters:
        """Request counters: ``.snapshot()``, ``.writes``, ``.reset()``."""
        return self.emulator.counters

    @property
    def store(self) -> Store:
        """The object store (direct, in-process access; bypasses faults and counters)."""
        return self.emulator.store

    def reset(self) -> None:
        """Delete every object and re-create the seed namespaces."""
        self.emulator.reset()

    def register_get(self, pattern: str, handler: GetHandler, **kwargs: Any) -> None:
        """See :meth:`Emulator.register_get`."""
        self.emulator.register_get(pattern, handler, **kwargs)

    def add_user(self, name: str) -> str:
        """A bearer token authenticating as user ``name`` (the same token on every call).

        Requests with it are recorded under ``name`` in :meth:`Counters.access`
        (the emulator's own token is user ``"admin"``); :meth:`kubeconfig` and
        :meth:`write_kubeconfig` take ``user=name``. Nothing else differs: the
        emulator authorizes every authenticated user for everything.
        """
        if name not in self._user_tokens:
            self._user_tokens[name] = secrets.token_hex(16)
            self.emulator.add_user(name, self._user_tokens[name])
        return self._user_tokens[name]

    def kubeconfig(self, *, context: str = "emulator", namespace: str = "default",
                   user: str | None = None) -> dict:
        """A kubeconfig dict pointing at this server with its bearer token, or with
        the token of ``user`` (:meth:`add_user`) when given."""
        token = self.token if user is None else self.add_user(user)
        return {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": context, "cluster": {"server": self.url}}],
            "users": [{"name": context, "user": {"token": token}}],
            "contexts": [{"name": context, "context": {"cluster": context, "user": context,
                                                       "namespace": namespace}}],
            "current-context": context,
            "preferences": {},
        }

    def write_kubeconfig(self, path: str | Path, *, context: str = "emulator",
                         user: str | None = None) -> Path:
        """Write :meth:`kubeconfig` (of ``user``, if given) as YAML to ``path`` (mode 0600);
        returns the path."""
        out = Path(path)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(yaml.safe_dump(self.kubeconfig(context=context, user=user),
                                      sort_keys=False))
        out.chmod(0o600)
        return out


def default_crd_dir() -> Path:
    """``<repo>/../shared/crds`` where <repo> holds the ``harness`` package."""
    return Path(__file__).resolve().parents[2].parent / "shared" / "crds"
