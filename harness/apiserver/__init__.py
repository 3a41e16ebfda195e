"""A Kubernetes API emulator on loopback for tests and the demo.

The official ``kubernetes`` Python client (typed APIs and DynamicClient) talks to
it over real HTTP through a generated kubeconfig::

    with EmulatorServer(crd_dir=".../shared/crds") as server:
        server.write_kubeconfig("/tmp/kubeconfig")
        server.faults.add("GET", r"/clusterqueues", 500, count=2)
        server.counters.snapshot()

Served: discovery (/version, /api, /api/v1, /apis, /apis/<g>, /apis/<g>/<v>;
legacy JSON only - the Python client never asks for aggregated discovery), core v1
namespaces, resourcequotas, pods, services, events, configmaps, limitranges,
scheduling.k8s.io/v1 priorityclasses, batch/v1 jobs, and every served version of
the CRDs found under ``crd_dir`` (Kueue's Workload included), plus Kueue's
visibility API ``visibility.kueue.x-k8s.io/v1beta2 .../localqueues/<lq>/pendingworkloads``
computed from the stored Workloads (:mod:`.kueue_visibility`); CRUD, list with
label/field selectors (events: ``involvedObject.*``), merge/strategic/JSON patch,
server-side apply, status subresources, Status errors, and test controls under
``/_emulator/`` (faults, reset, counters).

Known simplifications (deliberate; tests should not rely on the real behaviour):

* No watch, no pagination (``limit``/``continue`` ignored), no protobuf/CBOR.
* Strategic merge patch is treated as JSON merge patch (lists are replaced).
* Server-side apply treats every list as atomic (no list-map merge by key) and
  renders ``fieldsV1`` from owned leaf paths; see :mod:`.fields`.
* CEL rules (``x-kubernetes-validations``) and ``format`` are not checked.
* All served versions of a CRD share one stored object, with no conversion.
* Deletion is immediate: no finalizers, no graceful deletion, no Terminating
  namespaces; deleting a Namespace deletes everything in it at once.
* No admission, no garbage collection by ownerReferences, no controllers
  (Kueue/Volcano behaviour belongs to the scheduler simulator).
* Built-in kinds get few defaults (Namespace: finalizers, phase, the
  ``kubernetes.io/metadata.name`` label); CRDs get their schema ``default`` values.
"""

from .app import Emulator, GetRequest, Response
from .controls import Counters, Fault, Faults
from .errors import ApiError
from .registry import ResourceType, load_crds
from .server import EmulatorServer, default_crd_dir
from .store import Store

__all__ = [
    "ApiError",
    "Counters",
    "Emulator",
    "EmulatorServer",
    "Fault",
    "Faults",
    "GetRequest",
    "ResourceType",
    "Response",
    "Store",
    "default_crd_dir",
    "load_crds",
]
