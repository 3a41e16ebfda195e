"""The one port to a Kubernetes cluster: the only module that imports ``kubernetes``.

:class:`KubernetesCluster` wraps the official client's ``DynamicClient`` and
speaks plain dicts. Callers never see a ``kubernetes`` type: every failure is
one of

* :class:`TransientError` - worth retrying later: 409 Conflict, 429 Too Many
  Requests, any 5xx, request timeouts, refused or dropped connections
  (``retry_after`` carries the server's ``Retry-After`` seconds, parsed by the
  client's ``kubernetes.utils.retry.retry_after_seconds`` as client-go does);
* :class:`PermanentError` - retrying the same request cannot help: 400, 401,
  403, 404 where the object was expected, 405, 410, 422 Invalid (``message``
  is the API server's own message, e.g. the schema violation).

Objects are manifest dicts (``apiVersion``, ``kind``, ``metadata``, ...);
``namespace=None`` means cluster-scoped (or, for :meth:`KubernetesCluster.list`
of a namespaced kind, every namespace).

Writes use server-side apply with one field manager (:data:`FIELD_MANAGER`)
and ``force=True``: the portal owns the fields it sets, and takes them back
from whoever changed them by hand (drift). Fields set only by others are left
alone by apply.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import urllib3
from kubernetes import client as k8s_client
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException
from kubernetes.config.config_exception import ConfigException
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import ResourceNotFoundError, ResourceNotUniqueError
from kubernetes.utils.retry import retry_after_seconds

from queues.errors import ClusterError, PermanentError, TransientError

__all__ = [
    "DEFAULT_TIMEOUT",
    "VISIBILITY_API_VERSION",
    "WORKLOAD_API_VERSION",
    "FIELD_MANAGER",
    "ClusterError",
    "KubernetesCluster",
    "PermanentError",
    "TransientError",
]

#: The one server-side apply field manager of the portal.
FIELD_MANAGER = "gpu-quota-portal"

#: (connect, read) timeout in seconds of every request.
DEFAULT_TIMEOUT = (5.0, 30.0)

_TRANSIENT_STATUS = {409, 429}

#: Kueue's Workload kind and its on-demand visibility API.
WORKLOAD_API_VERSION = "kueue.x-k8s.io/v1beta2"
VISIBILITY_API_VERSION = "visibility.kueue.x-k8s.io/v1beta2"

T = TypeVar("T")


def _from_api_exception(exc: ApiException, what: str) -> ClusterError:
    status = exc.status
    reason, message = "", ""
    body = getattr(exc, "body", None)
    if body:
        try:
            parsed = json.loads(body)
        except (TypeError, ValueError):
            message = str(body)[:500]
        else:
            if isinstance(parsed, dict):
                reason = str(parsed.get("reason") or "")
                message = str(parsed.get("message") or "")
    reason = reason or str(exc.reason or "")
    message = message or f"{status} {exc.reason}"
    text = f"{what}: {message}"
    if status is None or status in _TRANSIENT_STATUS or status >= 500:
        return TransientError(text, status=status, reason=reason,
                              retry_after=retry_after_seconds(exc))
    return PermanentError(text, status=status, reason=reason)


class _TimeoutApiClient(k8s_client.ApiClient):
    """An ``ApiClient`` whose every request has a timeout, discovery included.

    The DynamicClient's discovery requests pass no ``_request_timeout``, and
    urllib3 then waits forever: a hung API server would hold a worker for
    good. Requests that name their own timeout keep it.
    """

    def __init__(self, configuration: k8s_client.Configuration,
                 timeout: tuple[float, float]) -> None:
        super().__init__(configuration)
        self._default_timeout = timeout

    def call_api(self, *args: Any, _request_timeout: Any = None, **kwargs: Any) -> Any:
        """``ApiClient.call_api`` with ``_request_timeout`` defaulting to the cluster's timeout."""
        return super().call_api(*args, _request_timeout=_request_timeout or self._default_timeout,
                                **kwargs)


class KubernetesCluster:
    """A cluster reached through a kubeconfig context or the in-cluster service account.

    ``KubernetesCluster(kubeconfig="/path", context="prod")``; ``kubeconfig=None``
    uses in-cluster configuration (``KUBERNETES_SERVICE_HOST`` and the mounted
    token); ``context=None`` (or ``""``) the kubeconfig's current context.
    ``timeout`` is the (connect, read) timeout in seconds of every request,
    discovery included; a request that outlasts it raises
    :class:`TransientError` (reason ``ReadTimeoutError``).
    Construction reads the configuration only; API discovery happens on first
    use. Raises :class:`PermanentError` for an unusable configuration.
    Thread-safe for use from one process.
    """

    def __init__(
        self,
        *,
        kubeconfig: str | Path | None = None,
        context: str | None = None,
        timeout: tuple[float, float] = DEFAULT_TIMEOUT,
    ) -> None:
        configuration = k8s_client.Configuration()
        try:
            if kubeconfig:
                k8s_config.load_kube_config(
                    config_file=str(kubeconfig),
                    context=context or None,
                    client_configuration=configuration,
                )
            else:
                k8s_config.load_incluster_config(client_configuration=configuration)
        except (ConfigException, OSError, TypeError, ValueError) as exc:
            raise PermanentError(f"kubernetes configuration: {exc}", reason="Config") from None
        # No hidden retries below us: the caller (Celery) retries with backoff.
        configuration.retries = False
        self._api_client = _TimeoutApiClient(configuration, timeout)
        self._timeout = timeout
        self._dynamic: DynamicClient | None = None
        self._lock = threading.Lock()
        self.host = configuration.host

    # -- plumbing

    def _call(self, what: str, fn: Callable[[], T]) -> T:
        try:
            return fn()
        except ApiException as exc:
            raise _from_api_exception(exc, what) from None
        except (ResourceNotFoundError, ResourceNotUniqueError) as exc:
            raise PermanentError(f"{what}: {exc}", status=404, reason="UnknownKind") from None
        except urllib3.exceptions.HTTPError as exc:
            raise TransientError(f"{what}: {exc.__class__.__name__}: {exc}",
                                 reason=exc.__class__.__name__) from None
        except (ConnectionError, TimeoutError, OSError) as exc:
            raise TransientError(f"{what}: {exc.__class__.__name__}: {exc}",
                                 reason=exc.__class__.__name__) from None

    def _client(self) -> DynamicClient:
        with self._lock:
            if self._dynamic is None:
                # A private discovery cache per process and server (the client's
                # default file is shared by every process talking to the host).
                digest = hashlib.sha256(str(self.host).encode()).hexdigest()[:16]
                name = f"gpu-quota-portal-{digest}-{os.getpid()}.json"
                cache = Path(tempfile.gettempdir()) / name
                self._dynamic = self._call(
                    "discovery", lambda: DynamicClient(self._api_client, cache_file=str(cache))
                )
            return self._dynamic

    def _resource(self, api_version: str, kind: str) -> Any:
        dyn = self._client()
        return self._call(
            f"discovery of {api_version} {kind}",
            lambda: dyn.resources.get(api_version=api_version, kind=kind),
        )

    @staticmethod
    def _describe(api_version: str, kind: str, name: str | None, namespace: str | None) -> str:
        where = f"{namespace}/" if namespace else ""
        return f"{kind}.{api_version} {where}{name or '*'}"

    # -- the port

    def apply(self, obj: dict) -> dict:
        """Server-side apply ``obj`` (field manager ``gpu-quota-portal``, ``force=True``).

        ``obj`` is a complete manifest with ``apiVersion``, ``kind`` and
        ``metadata.name`` (and ``metadata.namespace`` for namespaced kinds).
        Returns the object as stored after the apply (dict, with
        ``metadata.resourceVersion``/``generation`` and any ``status``).
        Raises :class:`PermanentError` (422 with the API's message when the
        object is invalid) or :class:`TransientError`.
        """
        api_version, kind = obj["apiVersion"], obj["kind"]
        meta = obj.get("metadata") or {}
        name, namespace = meta["name"], meta.get("namespace")
        resource = self._resource(api_version, kind)
        dyn = self._client()
        result = self._call(
            f"apply {self._describe(api_version, kind, name, namespace)}",
            lambda: dyn.server_side_apply(
                resource, body=obj, name=name, namespace=namespace,
                field_manager=FIELD_MANAGER, force_conflicts=True,
                _request_timeout=self._timeout,
            ),
        )
        return result.to_dict()

    def get(self, api_version: str, kind: str, name: str, namespace: str | None = None
            ) -> dict | None:
        """The live object as a dict, or ``None`` if it does not exist (404).

        Raises :class:`TransientError`, or :class:`PermanentError` (e.g. 403,
        or a kind the server does not serve).
        """
        resource = self._resource(api_version, kind)
        what = f"get {self._describe(api_version, kind, name, namespace)}"
        try:
            return self._call(
                what,
                lambda: resource.get(name=name, namespace=namespace,
                                     _request_timeout=self._timeout),
            ).to_dict()
        except PermanentError as exc:
            if exc.status == 404 and exc.reason != "UnknownKind":
                return None
            raise

    def list(self, api_version: str, kind: str, label_selector: str = "",
             namespace: str | None = None) -> list[dict]:
        """Objects of ``kind`` matching ``label_selector`` (``"k=v,k2=v2"``), as dicts.

        ``namespace=None`` lists every namespace for a namespaced kind. Each
        item carries ``apiVersion`` and ``kind``. Raises :class:`TransientError`
        or :class:`PermanentError`.
        """
        resource = self._resource(api_version, kind)
        listing = self._call(
            f"list {self._describe(api_version, kind, None, namespace)} [{label_selector}]",
            lambda: resource.get(namespace=namespace, label_selector=label_selector or None,
                                 _request_timeout=self._timeout),
        ).to_dict()
        items = []
        for item in listing.get("items") or []:
            item.setdefault("apiVersion", api_version)
            item.setdefault("kind", kind)
            items.append(item)
        return items

    def delete(self, api_version: str, kind: str, name: str, namespace: str | None = None,
               *, missing_ok: bool = True) -> bool:
        """Delete one object; ``True`` if deleted, ``False`` if it was already gone.

        With ``missing_ok=False`` a missing object raises :class:`PermanentError`
        (404). Other failures raise :class:`TransientError` or :class:`PermanentError`.
        """
        resource = self._resource(api_version, kind)
        what = f"delete {self._describe(api_version, kind, name, namespace)}"
        dyn = self._client()
        try:
            self._call(what, lambda: dyn.delete(resource, name=name, namespace=namespace,
                                                _request_timeout=self._timeout))
        except PermanentError as exc:
            if exc.status == 404 and exc.reason != "UnknownKind" and missing_ok:
                return False
            raise
        return True

    def create(self, obj: dict, *, field_manager: str = FIELD_MANAGER) -> dict:
        """Create ``obj`` (POST); the stored object. A 409 AlreadyExists raises
        :class:`TransientError` with ``reason == "AlreadyExists"``; other failures as usual.
        """
        api_version, kind = obj["apiVersion"], obj["kind"]
        meta = obj.get("metadata") or {}
        namespace = meta.get("namespace")
        resource = self._resource(api_version, kind)
        what = f"create {self._describe(api_version, kind, meta.get('name'), namespace)}"
        return self._call(what, lambda: resource.create(
            body=obj, namespace=namespace, field_manager=field_manager,
            _request_timeout=self._timeout,
        )).to_dict()

    def issue_command(self, command: dict) -> dict:
        """Create a Volcano ``bus.volcano.sh/v1alpha1`` Command (see
        ``queues.backends.volcano.jobs.render_command``); the stored Command.

        Idempotent: a Command of that name still waiting for Volcano's
        controller (409 AlreadyExists) is returned as it is. Raises
        :class:`TransientError` or :class:`PermanentError` (404 ``UnknownKind``
        when Volcano is not installed).
        """
        try:
            return self.create(command)
        except TransientError as exc:
            if exc.reason != "AlreadyExists":
                raise
        meta = command["metadata"]
        existing = self.get(command["apiVersion"], command["kind"], meta["name"],
                            meta.get("namespace"))
        return existing if existing is not None else self.create(command)

    def patch(self, api_version: str, kind: str, name: str, namespace: str | None, patch: dict,
              *, subresource: str = "", field_manager: str = FIELD_MANAGER) -> dict:
        """JSON merge patch (RFC 7386) of one object, or of its ``status`` subresource
        (``subresource="status"``); the patched object. Lists in ``patch`` replace
        the stored lists whole. Raises :class:`PermanentError` (404 if missing) or
        :class:`TransientError`.
        """
        resource = self._resource(api_version, kind)
        target = resource.subresources[subresource] if subresource else resource
        what = f"patch {self._describe(api_version, kind, name, namespace)}" + (
            f"/{subresource}" if subresource else "")
        return self._call(what, lambda: target.patch(
            name=name, namespace=namespace, body=patch,
            content_type="application/merge-patch+json", field_manager=field_manager,
            _request_timeout=self._timeout,
        )).to_dict()

    def status(self, api_version: str, kind: str, name: str, namespace: str | None = None
               ) -> dict | None:
        """The object's ``status`` dict (``{}`` when it has none), ``None`` if it does not exist.

        Raises :class:`TransientError` or :class:`PermanentError`.
        """
        live = self.get(api_version, kind, name, namespace)
        if live is None:
            return None
        return live.get("status") or {}

    # -- gang jobs: Workloads, queue positions, cancel, events

    def list_workloads(self, namespace: str, label_selector: str = "") -> list[dict]:
        """Kueue ``Workload`` objects (v1beta2 dicts) in ``namespace`` matching ``label_selector``.

        Raises :class:`TransientError` or :class:`PermanentError` (404
        ``UnknownKind`` when Kueue is not installed).
        """
        return self.list(WORKLOAD_API_VERSION, "Workload", label_selector, namespace)

    def pending_workloads(self, namespace: str, local_queue: str) -> list[dict]:
        """Kueue's visibility API: the pending Workloads of a LocalQueue, in queue order.

        ``GET /apis/visibility.kueue.x-k8s.io/v1beta2/namespaces/<ns>/localqueues/<lq>/
        pendingworkloads`` (a ``PendingWorkloadsSummary``). Returns its
        ``items``: dicts with ``metadata.name``/``namespace``, ``priority``,
        ``localQueueName``, ``positionInLocalQueue`` and ``positionInClusterQueue``
        (0-based, 0 = next). A 404 (no such LocalQueue, or the visibility API not
        served) raises :class:`PermanentError`; other failures as usual.
        """
        path = (f"/apis/{VISIBILITY_API_VERSION}/namespaces/{namespace}/localqueues/"
                f"{local_queue}/pendingworkloads")
        body = self._raw_get(f"pending workloads of {namespace}/{local_queue}", path)
        return [dict(item) for item in body.get("items") or []]

    def deactivate_workload(self, namespace: str, name: str) -> dict | None:
        """Merge-patch ``spec.active: false`` on a Workload; the patched object, ``None`` if gone.

        Kueue then evicts the workload (its pods stop; suspending an admitted
        job alone does not stop it). Raises :class:`TransientError` or
        :class:`PermanentError`.
        """
        resource = self._resource(WORKLOAD_API_VERSION, "Workload")
        what = f"deactivate {self._describe(WORKLOAD_API_VERSION, 'Workload', name, namespace)}"
        try:
            result = self._call(what, lambda: resource.patch(
                name=name, namespace=namespace, body={"spec": {"active": False}},
                content_type="application/merge-patch+json", _request_timeout=self._timeout,
            ))
        except PermanentError as exc:
            if exc.status == 404 and exc.reason != "UnknownKind":
                return None
            raise
        return result.to_dict()

    def delete_background(self, api_version: str, kind: str, name: str, namespace: str) -> bool:
        """Delete with ``propagationPolicy: Background`` (dependents - pods, child Jobs -
        are removed by the garbage collector afterwards). ``True`` if deleted,
        ``False`` if already gone. Raises :class:`TransientError` or :class:`PermanentError`.
        """
        resource = self._resource(api_version, kind)
        what = f"delete {self._describe(api_version, kind, name, namespace)}"
        dyn = self._client()
        body = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"}
        try:
            self._call(what, lambda: dyn.delete(resource, name=name, namespace=namespace,
                                                body=body, _request_timeout=self._timeout))
        except PermanentError as exc:
            if exc.status == 404 and exc.reason != "UnknownKind":
                return False
            raise
        return True

    def list_events(self, namespace: str, involved_name: str = "",
                    involved_kind: str = "") -> list[dict]:
        """core/v1 Events in ``namespace`` about the object named ``involved_name``
        (every object of ``involved_kind`` when the name is empty: one request for a
        whole namespace).

        Uses the field selectors ``involvedObject.name=<name>`` and
        ``involvedObject.kind=<kind>`` for whichever is given, oldest first by
        ``lastTimestamp`` (else ``eventTime``, ``firstTimestamp``, creation time).
        """
        terms = [f"involvedObject.name={involved_name}" if involved_name else "",
                 f"involvedObject.kind={involved_kind}" if involved_kind else ""]
        selector = ",".join(t for t in terms if t) or None
        resource = self._resource("v1", "Event")
        listing = self._call(
            f"list events of {namespace}/{involved_name or involved_kind or '*'}",
            lambda: resource.get(namespace=namespace, field_selector=selector,
                                 _request_timeout=self._timeout),
        ).to_dict()
        items = []
        for item in listing.get("items") or []:
            item.setdefault("apiVersion", "v1")
            item.setdefault("kind", "Event")
            items.append(item)

        def when(event: dict) -> str:
            return str(event.get("lastTimestamp") or event.get("eventTime")
                       or event.get("firstTimestamp")
                       or (event.get("metadata") or {}).get("creationTimestamp") or "")

        return sorted(items, key=when)

    def _raw_get(self, what: str, path: str) -> dict:
        dyn = self._client()
        result = self._call(what, lambda: dyn.request(
            "GET", path, _request_timeout=self._timeout))
        return result.to_dict() if hasattr(result, "to_dict") else dict(result)
