"""Request routing for the emulator, independent of the HTTP transport.

:class:`Emulator` maps (method, path, query, headers, body) to a
:class:`Response`; the HTTP server in :mod:`.server` is a thin shell around it.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs

import yaml

from .controls import GATE_TIMEOUT, Counters, Fault, Faults
from .errors import ApiError, bad_request
from .registry import BUILTIN_TYPES, Registry, ResourceType, load_crds
from .store import APPLY_PATCH, Store

SERVER_VERSION = {
    "major": "1",
    "minor": "37",
    "gitVersion": "v1.37.0-emulator",
    "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean",
    "buildDate": "2026-01-01T00:00:00Z",
    "goVersion": "go1.25",
    "compiler": "gc",
    "platform": "linux/amd64",
}
SEED_NAMESPACES = ("default", "kube-system", "kube-public")
#: The user the emulator's own ``token`` authenticates as (others: :meth:`Emulator.add_user`).
DEFAULT_USER = "admin"
#: The user name of a request whose bearer token is unknown (it is then answered 401).
ANONYMOUS = "system:anonymous"


@dataclass
class Response:
    """An answer: HTTP ``code``, JSON-ready ``body`` (None = empty), extra ``headers``.

    ``drop`` asks the transport to close the connection without answering.
    """

    code: int
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    drop: bool = False


@dataclass
class GetRequest:
    """What a custom GET handler receives: the regex ``match`` of its path pattern,
    the parsed ``query`` ({name: [values]}), and the emulator's ``store``."""

    path: str
    match: re.Match[str]
    query: dict[str, list[str]]
    store: Store
    registry: Registry


GetHandler = Callable[[GetRequest], Any]


def _not_found_path() -> ApiError:
    return ApiError(404, "the server could not find the requested resource", reason="NotFound",
                    details={"causes": [{"reason": "UnexpectedServerResponse",
                                         "message": "404 page not found"}]})


class Emulator:
    """The Kubernetes API emulator's state (store, faults, counters) and router.

    ``crd_dir``: folder searched recursively for CRD YAML files (None = only the
    built-in kinds). ``token``: bearer token required on Kubernetes paths (None =
    any); it authenticates as :data:`DEFAULT_USER`, and :meth:`add_user` adds
    more tokens, each naming a user, so that :class:`Counters` can tell apart
    what each client needed (as an RBAC authorizer sees each user). Raises
    FileNotFoundError/ValueError for a bad ``crd_dir``. Extra read paths (Kueue's
    visibility API, :mod:`.kueue_visibility`) are installed on it by
    :class:`.server.EmulatorServer` with :meth:`register_get`.
    """

    def __init__(self, crd_dir: str | None = None, *, token: str | None = None,
                 seed_namespaces: tuple[str, ...] = SEED_NAMESPACES) -> None:
        types: list[ResourceType] = list(BUILTIN_TYPES)
        if crd_dir is not None:
            types += load_crds(crd_dir)
        self.registry = Registry(types)
        self.store = Store(self.registry)
        self.faults = Faults()
        self.counters = Counters()
        self.token = token
        self._users: dict[str, str] = {}  # further bearer token -> user name
        self._seed_namespaces = seed_namespaces
        self._custom_gets: list[tuple[re.Pattern[str], GetHandler]] = []
        self._extra_resources: dict[tuple[str, str], list[dict[str, Any]]] = {}
        self.reset()

    # ------------------------------------------------------------------ public API

    def reset(self) -> None:
        """Delete every object and re-create the seed namespaces."""
        ns = self.registry.lookup("", "v1", "namespaces")
        with self.store.lock:
            self.store.reset()
            for name in self._seed_namespaces:
                self.store.create(ns, None, {"metadata": {"name": name}}, manager="emulator")

    def add_user(self, name: str, token: str) -> None:
        """Accept ``token`` as a bearer token authenticating as user ``name``.

        Access is then recorded under ``name`` (:meth:`Counters.access`). Users
        are authentication settings, not objects: :meth:`reset` keeps them.
        """
        self._users[token] = name

    def user_of(self, headers: dict[str, str]) -> str:
        """The user a request's ``Authorization: Bearer <token>`` header authenticates as.

        The emulator's own token (or any token when it has none) ->
        :data:`DEFAULT_USER`; a token from :meth:`add_user` -> its user; else
        :data:`ANONYMOUS` (answered 401 when the emulator has a token).
        ``headers`` keys are lower-case.
        """
        auth = headers.get("authorization", "")
        token = auth[len("Bearer "):] if auth.startswith("Bearer ") else None
        if token is not None and token in self._users:
            return self._users[token]
        if self.token is None or token == self.token:
            return DEFAULT_USER
        return ANONYMOUS

    def register_get(self, pattern: str, handler: GetHandler, *, group: str | None = None,
                     version: str | None = None,
                     resources: list[dict[str, Any]] | None = None) -> None:
        """Serve GET requests whose path fully matches ``pattern`` with ``handler``.

        ``handler(GetRequest)`` returns a JSON-ready body (HTTP 200) or raises
        ApiError. The latest registration matching a path wins (so a test can
        replace the built-in Kueue visibility handler). With ``group``/``version``,
        discovery announces that group version with the given APIResource dicts
        (``resources``), e.g. Kueue's visibility API (served built in, see
        :mod:`.kueue_visibility`)::

            emu.register_get(
                r"/apis/visibility.kueue.x-k8s.io/v1beta2/namespaces/(?P<ns>[^/]+)"
                r"/localqueues/(?P<lq>[^/]+)/pendingworkloads", handler,
                group="visibility.kueue.x-k8s.io", version="v1beta2",
                resources=[{"name": "localqueues/pendingworkloads", "namespaced": True,
                            "kind": "PendingWorkloadsSummary", "verbs": ["get"]}])
        """
        self._custom_gets.insert(0, (re.compile(pattern), handler))
        if group and version:
            self.registry.add_group_version(group, version)
            listed = self._extra_resources.setdefault((group, version), [])
            names = {r.get("name") for r in resources or ()}
            listed[:] = [r for r in listed if r.get("name") not in names] + list(resources or [])

    def handle(self, method: str, raw_path: str, headers: dict[str, str],
               body: bytes) -> Response:
        """Answer one request. ``headers`` keys are lower-case."""
        path, _, query_string = raw_path.partition("?")
        path = path.rstrip("/") or "/"
        query = parse_qs(query_string, keep_blank_values=True)
        if path.startswith("/_emulator"):
            return self._control(method, path, body)
        try:
            verb, resource, action = self._route(method, path, query, headers, body)
        except ApiError as err:
            self.counters.record("unknown", None)
            return _error(err)
        self.counters.record(verb, resource)
        user = self.user_of(headers)
        rbac = rbac_attributes(path) if resource is not None else None
        if rbac is not None:
            self.counters.record_access(verb, *rbac, user=user)
        fault = self.faults.take(method, path)
        if fault is not None:
            if fault.gate is not None:
                fault.gate.wait(GATE_TIMEOUT)
            if fault.delay:
                time.sleep(fault.delay)
            if fault.drop:
                return Response(0, drop=True)
            if fault.status is not None:
                return _fault_response(fault)
        if self.token and resource is not None and user == ANONYMOUS:
            return _error(ApiError(401, "Unauthorized", reason="Unauthorized"))
        try:
            return action()
        except ApiError as err:
            return _error(err)
        except Exception as exc:  # a bug in the emulator: answer like a server would
            return _error(ApiError(500, f"emulator internal error: {exc!r}",
                                   reason="InternalError"))

    # ------------------------------------------------------------------ routing

    def _route(self, method: str, path: str, query: dict[str, list[str]],
               headers: dict[str, str], body: bytes
               ) -> tuple[str, str | None, Callable[[], Response]]:
        if method == "GET":
            for pattern, handler in self._custom_gets:
                m = pattern.fullmatch(path)
                if m:
                    req = GetRequest(path, m, query, self.store, self.registry)
                    return "get", path, lambda h=handler, r=req: Response(200, h(r))
            disc = self._discovery(path)
            if disc is not None:
                return "discovery", None, lambda: Response(200, disc)
        segs = path.strip("/").split("/")
        if segs[0] == "api" and len(segs) >= 3 and segs[1] == "v1":
            group, version, rest = "", "v1", segs[2:]
        elif segs[0] == "apis" and len(segs) >= 4:
            group, version, rest = segs[1], segs[2], segs[3:]
        else:
            raise _not_found_path()
        namespace = None
        if rest[0] == "namespaces" and len(rest) >= 3 and rest[2] not in ("status", "finalize"):
            namespace, rest = rest[1], rest[2:]
        if len(rest) > 3:
            raise _not_found_path()
        plural = rest[0]
        name = rest[1] if len(rest) > 1 else None
        sub = rest[2] if len(rest) > 2 else ""
        rt = self.registry.lookup(group, version, plural)
        if rt is None or (namespace is not None and not rt.namespaced):
            raise _not_found_path()
        if sub and (sub != "status" or not rt.has_status):
            raise _not_found_path()
        resource = f"{group}/{plural}" + (f"/{sub}" if sub else "")

        def q(key: str) -> str | None:
            vals = query.get(key)
            return vals[0] if vals else None

        dry_run = q("dryRun") == "All"
        ua = headers.get("user-agent", "unknown")
        manager = q("fieldManager") or ua.split("/", 1)[0][:128] or "unknown"
        store = self.store

        if method == "GET":
            if q("watch") in ("true", "1"):
                raise ApiError(405, "watch is not supported by the emulator",
                               reason="MethodNotAllowed")
            if name:
                return "get", resource, lambda: Response(200, store.get(rt, namespace, name))
            if sub:
                raise _not_found_path()
            return "list", resource, lambda: Response(200, store.list(
                rt, namespace, q("labelSelector"), q("fieldSelector")))
        if method == "POST" and not name:
            return "create", resource, lambda: Response(201, store.create(
                rt, namespace, _json(body), manager=manager, dry_run=dry_run))
        if method == "PUT" and name:
            return "update", resource, lambda: Response(200, store.replace(
                rt, namespace, name, _json(body), manager=manager, subresource=sub,
                dry_run=dry_run))
        if method == "PATCH" and name:
            ctype = headers.get("content-type", "").split(";")[0].strip()

            def do_patch() -> Response:
                patch = _yaml(body) if ctype == APPLY_PATCH else _json(body)
                obj, created = store.patch(
                    rt, namespace, name, patch, ctype, manager=q("fieldManager") if
                    ctype == APPLY_PATCH else manager, subresource=sub,
                    force=q("force") in ("true", "True", "1"), dry_run=dry_run)
                if created:  # an apply that creates is authorized as create too
                    self.counters.record_access("create", group, plural,
                                                user=self.user_of(headers))
                return Response(201 if created else 200, obj)

            return "patch", resource, do_patch
        if method == "DELETE" and name and not sub:
            return "delete", resource, lambda: Response(200, store.delete(
                rt, namespace, name, dry_run=dry_run))
        if method == "DELETE" and not name:
            return "deletecollection", resource, lambda: Response(200, store.delete_collection(
                rt, namespace, q("labelSelector"), q("fieldSelector")))
        raise ApiError(405, f"the server does not allow this method on the requested resource "
                       f"({method} {path})", reason="MethodNotAllowed")

    def _discovery(self, path: str) -> dict[str, Any] | None:
        if path == "/version":
            return dict(SERVER_VERSION)
        if path == "/api":
            return {"kind": "APIVersions", "versions": ["v1"],
                    "serverAddressByClientCIDRs": [
                        {"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}]}
        if path == "/api/v1":
            return self._resource_list("", "v1")
        if path == "/apis":
            return {"kind": "APIGroupList", "apiVersion": "v1",
                    "groups": [self._group(g, vs) for g, vs in
                               sorted(self.registry.groups().items())]}
        segs = path.strip("/").split("/")
        if segs[0] != "apis" or len(segs) not in (2, 3):
            return None
        groups = self.registry.groups()
        if segs[1] not in groups:
            return None
        if len(segs) == 2:
            return {"kind": "APIGroup", "apiVersion": "v1", **self._group(segs[1],
                                                                          groups[segs[1]])}
        if segs[2] not in groups[segs[1]]:
            return None
        return self._resource_list(segs[1], segs[2])

    @staticmethod
    def _group(group: str, versions: list[str]) -> dict[str, Any]:
        entries = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
        return {"name": group, "versions": entries, "preferredVersion": entries[0]}

    def _resource_list(self, group: str, version: str) -> dict[str, Any]:
        resources: list[dict[str, Any]] = []
        for rt in sorted(self.registry.types(group, version), key=lambda r: r.plural):
            resources += rt.api_resources()
        resources += self._extra_resources.get((group, version), [])
        return {"kind": "APIResourceList", "apiVersion": "v1",
                "groupVersion": f"{group}/{version}" if group else version,
                "resources": resources}

    # ------------------------------------------------------------------ /_emulator

    def _control(self, method: str, path: str, body: bytes) -> Response:
        """/_emulator/: POST/GET/DELETE faults, POST reset, GET/DELETE counters.

        Bodies carry a ``kind`` so the DynamicClient's ``request()`` can read them.
        """
        try:
            if path == "/_emulator/faults" and method == "POST":
                data = json.loads(body or b"{}")
                fault = self.faults.add_fault(Fault.from_dict(data))
                return Response(201, {"kind": "EmulatorFault", **fault.to_dict()})
            if path == "/_emulator/faults" and method == "GET":
                return Response(200, {"kind": "EmulatorFaultList", "faults": self.faults.list()})
            if path == "/_emulator/faults" and method == "DELETE":
                self.faults.clear()
                return Response(200, {"kind": "EmulatorResult", "cleared": True})
            if path == "/_emulator/reset" and method == "POST":
                self.reset()
                return Response(200, {"kind": "EmulatorResult", "reset": True})
            if path == "/_emulator/counters" and method == "GET":
                return Response(200, {"kind": "EmulatorCounters", **self.counters.snapshot()})
            if path == "/_emulator/counters" and method == "DELETE":
                self.counters.reset()
                return Response(200, {"kind": "EmulatorResult", "reset": True})
        except (ValueError, TypeError, re.error) as exc:
            return _error(bad_request(f"bad control request: {exc}"))
        return _error(_not_found_path())


def rbac_attributes(path: str) -> tuple[str, str] | None:
    """``(apiGroup, resource)`` an RBAC authorizer checks for a resource URL path, else None.

    ``/api/v1/namespaces/a/resourcequotas/q`` -> ``("", "resourcequotas")``;
    ``/apis/kueue.x-k8s.io/v1beta2/clusterqueues/q/status`` ->
    ``("kueue.x-k8s.io", "clusterqueues/status")``; ``/api/v1/namespaces/a`` ->
    ``("", "namespaces")``. Discovery paths (``/api``, ``/apis/<group>``) -> None.
    """
    segs = path.strip("/").split("/")
    if segs[0] == "api" and len(segs) >= 3 and segs[1] == "v1":
        group, rest = "", segs[2:]
    elif segs[0] == "apis" and len(segs) >= 4:
        group, rest = segs[1], segs[3:]
    else:
        return None
    if rest[0] == "namespaces" and len(rest) >= 3 and rest[2] not in ("status", "finalize"):
        rest = rest[2:]
    return group, rest[0] + (f"/{rest[2]}" if len(rest) > 2 else "")


def _json(body: bytes) -> Any:
    try:
        return json.loads(body or b"null")
    except ValueError as exc:
        raise bad_request(f"couldn't decode the request body as JSON: {exc}") from None


def _yaml(body: bytes) -> Any:
    try:
        return yaml.safe_load(body or b"")
    except yaml.YAMLError as exc:
        raise bad_request(f"couldn't decode the apply configuration: {exc}") from None


def _error(err: ApiError) -> Response:
    return Response(err.code, err.to_status(), headers=dict(err.headers))


def _fault_response(fault: Fault) -> Response:
    headers = {}
    if fault.retry_after is not None:
        headers["Retry-After"] = str(fault.retry_after)
    code = int(fault.status or 500)
    err = ApiError(code, fault.message or f"injected fault {fault.id}", reason=fault.reason)
    return Response(code, err.to_status(), headers=headers)
