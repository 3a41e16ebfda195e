"""Real tier: the portal against a real control plane built from pinned Go modules.

etcd, kube-apiserver (TLS, RBAC), kube-controller-manager, kube-scheduler, KWOK
nodes, Kueue with its webhooks and JobSet (see ``harness/realcluster``) are
brought up once per session and stopped at its end. The portal's Celery worker
(the integration tier's ``celery_worker_process``) talks to it as the
``gpu-quota-portal`` ServiceAccount of ``deploy/rbac.yaml``; the tests read and
poke the cluster as admin (``admin_port``).

With ``CI=true`` nothing here skips: unbuilt components are built (cached),
and a missing Go toolchain or a control plane that does not come up fails.
"""

import contextlib
import itertools
import os
import shutil
import time
import uuid
from decimal import Decimal

import pytest
from django.contrib.auth import get_user_model

# The integration tier's fixtures, shared (PostgreSQL/Redis checks, the Celery worker,
# API clients, a per-test worker that can be killed).
from tests.integration.conftest import (  # noqa: F401
    _real_services,
    api,
    celery_worker_process,
)
from tests.integration.reconcile.conftest import converged, start_worker  # noqa: F401
from tests.services import unavailable

KUEUE = "kueue.x-k8s.io/v1beta2"
H100_PRODUCT = "NVIDIA-H100-80GB-HBM3"
MIG_RESOURCE = "nvidia.com/mig-1g.10gb"
#: What the KWOK nodes offer: two H100 nodes (16 GPUs) and one MIG node (8 slices).
H100_GPUS = 16
MIG_GPUS = 8

_seq = itertools.count(1)


def _pools():
    from harness.realcluster.controlplane import GpuNodePool

    return [
        GpuNodePool(flavor="h100", gpus=H100_GPUS,
                    node_labels={"nvidia.com/gpu.product": H100_PRODUCT}),
        GpuNodePool(flavor="mig", gpu_resource=MIG_RESOURCE, gpus=MIG_GPUS,
                    node_labels={"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB"}),
    ]


@pytest.fixture(scope="session")
def real_cluster(tmp_path_factory):
    """The control plane (a ``harness.realcluster.controlplane.ControlPlane``), up."""
    from harness.realcluster import components
    from harness.realcluster.controlplane import ControlPlane, ControlPlaneError

    if components.missing() and shutil.which("go") is None:
        unavailable("the real tier builds its components with Go (install golang-go 1.25+): "
                    f"not built yet: {', '.join(components.missing())}")
    if os.geteuid() != 0:
        unavailable("the real tier runs Kueue in a private mount namespace (its cert paths "
                    "are fixed): run it as root")
    try:
        components.build()
    except RuntimeError as exc:
        pytest.fail(f"building the real components failed: {exc}")
    plane = ControlPlane(tmp_path_factory.mktemp("realcluster"))
    try:
        plane.up(_pools())
    except (ControlPlaneError, RuntimeError) as exc:
        plane.down()
        pytest.fail(f"the real control plane did not come up: {exc}")
    try:
        yield plane
    finally:
        plane.down()


@pytest.fixture(scope="session")
def kubeconfig_path(real_cluster):
    """The worker's kubeconfig: the portal ServiceAccount's token (RBAC of deploy/rbac.yaml)."""
    return real_cluster.portal_kubeconfig


@pytest.fixture
def admin_port(real_cluster):
    """The cluster as admin, through the portal's own port (plain dicts)."""
    from queues.cluster import KubernetesCluster

    return KubernetesCluster(kubeconfig=real_cluster.admin_kubeconfig)


@pytest.fixture
def portal_port(real_cluster):
    """The cluster as the portal's ServiceAccount."""
    from queues.cluster import KubernetesCluster

    return KubernetesCluster(kubeconfig=real_cluster.portal_kubeconfig)


def wait_until(predicate, what: str, timeout: float = 60.0, interval: float = 0.3):
    """Poll ``predicate()`` until it returns a truthy value; fail naming ``what``."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = predicate()
        if last:
            return last
        time.sleep(interval)
    pytest.fail(f"timed out after {timeout:.0f} s waiting for {what} (last: {last!r})")


def condition(obj: dict | None, kind: str) -> dict | None:
    """The status condition of type ``kind`` of ``obj``, or ``None``."""
    for cond in ((obj or {}).get("status") or {}).get("conditions") or []:
        if cond.get("type") == kind:
            return cond
    return None


@pytest.fixture
def rworld(transactional_db, real_cluster, kubeconfig_path, admin_port, settings):
    """A small Kueue world with names unique to the test (the control plane is shared).

    One cluster row, flavors ``h100-<n>`` (on the H100 KWOK nodes) and
    ``mig-<n>`` (MIG nodes), cohort ``research-<n>``; teams ``ta-<n>`` (8 H100)
    and ``tb-<n>`` (8 H100, lending at most 4), priority ``high-<n>`` (1000);
    users ``staff``, ``lead_a`` and ``member_a`` (team a), ``member_b`` (team b).
    At the end the teams' namespaces and the cluster-scoped objects are deleted
    (as admin) and the test waits until no pod is left on the KWOK nodes.
    """
    from portal.models import (
        Cluster,
        Cohort,
        GpuFlavor,
        Membership,
        PriorityClass,
        QuotaGrant,
        Team,
    )

    settings.KUBECONFIG = str(kubeconfig_path)
    settings.KUBE_CONTEXT = ""
    n = f"{next(_seq)}{uuid.uuid4().hex[:4]}"
    users = get_user_model().objects
    staff = users.create_user("staff", password="pw-staff-123", is_staff=True)
    cluster = Cluster.objects.create(name=f"real-{n}", backend="kueue")
    h100 = GpuFlavor.objects.create(
        cluster=cluster, name=f"h100-{n}", gpu_resource="nvidia.com/gpu", gpu_model="H100",
        physical_gpus=H100_GPUS, cpu_per_gpu="4", memory_per_gpu="32Gi",
        node_labels={"nvidia.com/gpu.product": H100_PRODUCT},
    )
    mig = GpuFlavor.objects.create(
        cluster=cluster, name=f"mig-{n}", gpu_resource=MIG_RESOURCE, gpu_model="A100",
        physical_gpus=MIG_GPUS, cpu_per_gpu="1", memory_per_gpu="8Gi",
        node_labels={"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB"},
    )
    cohort = Cohort.objects.create(cluster=cluster, name=f"research-{n}", weight=Decimal("1"))
    team_a = Team.objects.create(slug=f"ta-{n}", name="Team A", cluster=cluster, cohort=cohort)
    team_b = Team.objects.create(slug=f"tb-{n}", name="Team B", cluster=cluster, cohort=cohort)
    QuotaGrant.objects.create(team=team_a, flavor=h100, nominal_gpus=8)
    QuotaGrant.objects.create(team=team_b, flavor=h100, nominal_gpus=8, lending_limit_gpus=4)
    high = PriorityClass.objects.create(name=f"high-{n}", value=1000)
    people = {}
    for name, team, role in (("lead_a", team_a, "lead"), ("member_a", team_a, "member"),
                             ("member_b", team_b, "member")):
        people[name] = users.create_user(name, password=f"pw-{name}-123")
        Membership.objects.create(user=people[name], team=team, role=role)
    world = {"n": n, "staff": staff, "cluster": cluster, "h100": h100, "mig": mig,
             "cohort": cohort, "team_a": team_a, "team_b": team_b, "high": high,
             "plane": real_cluster, "admin": admin_port, **people}
    yield world
    _clean(admin_port, n)


def _clean(port, n: str) -> None:
    """Delete what the test left on the cluster (namespaces first: their jobs and pods)."""
    from queues.cluster import ClusterError

    selector = "app.kubernetes.io/managed-by=gpu-quota-portal"
    for api_version, kind in (("v1", "Namespace"), (KUEUE, "ClusterQueue"), (KUEUE, "Cohort"),
                              (KUEUE, "ResourceFlavor"), (KUEUE, "WorkloadPriorityClass"),
                              ("scheduling.k8s.io/v1", "PriorityClass")):
        try:
            items = port.list(api_version, kind, selector)
        except ClusterError:
            continue
        for item in items:
            name = item["metadata"]["name"]
            if n in name:
                with contextlib.suppress(ClusterError):
                    port.delete(api_version, kind, name)

    def no_pods_left():
        pods = port.list("v1", "Pod", "")
        return not [p for p in pods if n in p["metadata"]["namespace"]]

    wait_until(no_pods_left, f"the pods of test world {n} to be gone", timeout=60)
