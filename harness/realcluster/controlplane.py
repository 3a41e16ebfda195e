"""A real Kubernetes control plane with the real Kueue and JobSet, on loopback.

``ControlPlane(state_dir).up()`` starts, in this order and each as its own
process recorded by PID in ``state.json``: etcd, kube-apiserver (TLS, RBAC,
service-account keys, front-proxy for aggregated APIs), the CRDs of Kueue and
JobSet read from their Go modules, kube-controller-manager, kube-scheduler,
KWOK (fake nodes and pod lifecycle), Kueue (its webhooks served on loopback with
our CA and registered, its visibility API aggregated through the apiserver) and
the JobSet controller (its webhooks too). ``down()`` stops them by PID.

Then it applies ``deploy/rbac.yaml`` and writes two kubeconfigs: ``admin``
(system:masters) and ``portal`` (the ``gpu-quota-portal`` ServiceAccount's
token from the TokenRequest API, so the RBAC authorizer judges every request of
the portal's worker against exactly that ClusterRole).
"""

from __future__ import annotations

import contextlib
import copy
import json
import math
import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from harness.realcluster import components as comp
from harness.realcluster.pki import make_pki, serving_dir

REPO_ROOT = Path(__file__).resolve().parents[2]
RBAC_YAML = REPO_ROOT / "deploy" / "rbac.yaml"
KWOK_NODE_ANNOTATION = "kwok.x-k8s.io/node"
#: A pod of a Job carrying this annotation (value "true") is completed by KWOK.
COMPLETE_ANNOTATION = "realcluster.gpu-quota-portal/complete"
PORTAL_NAMESPACE = "gpu-quota-portal"
PORTAL_SERVICE_ACCOUNT = "gpu-quota-portal"
KUEUE_NAMESPACE = "kueue-system"
#: Kueue's cert paths that no configuration moves (see README): bind-mounted per process.
KUEUE_FIXED_CERT_DIRS = ("/visibility", "/etc/kueue/metrics/certs")
#: Mutating/validating webhooks registered for these API groups only (the
#: integrations we enable); the rest of Kueue's list is for frameworks not run here.
KUEUE_WEBHOOK_GROUPS = {"kueue.x-k8s.io", "batch", "jobset.x-k8s.io"}
#: CRDs that Kueue's kustomization switches to its conversion webhook.
KUEUE_CONVERTED_CRDS = ("localqueues", "clusterqueues", "cohorts", "workloads",
                        "multikueueclusters")


class ControlPlaneError(RuntimeError):
    """A component did not start or answer; the message names it and its log."""


@dataclass(frozen=True)
class GpuNodePool:
    """KWOK nodes for one GPU flavor: its labels and taints, ``gpus_per_node`` GPUs each."""

    flavor: str
    gpu_resource: str = "nvidia.com/gpu"
    gpus: int = 8
    gpus_per_node: int = 8
    node_labels: dict[str, str] = field(default_factory=dict)
    node_taints: tuple[dict, ...] = ()

    def nodes(self) -> list[dict]:
        count = max(1, math.ceil(self.gpus / self.gpus_per_node))
        out = []
        for index in range(count):
            name = f"kwok-{self.flavor}-{index}"
            resources = {"cpu": "256", "memory": "2Ti", "pods": "110",
                         self.gpu_resource: str(self.gpus_per_node)}
            labels = {"type": "kwok", "kubernetes.io/hostname": name,
                      "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
                      "realcluster.gpu-quota-portal/flavor": self.flavor, **self.node_labels}
            out.append({
                "apiVersion": "v1", "kind": "Node",
                "metadata": {"name": name, "labels": labels,
                             "annotations": {KWOK_NODE_ANNOTATION: "fake"}},
                "spec": {"taints": [dict(t) for t in self.node_taints]},
                "status": {"allocatable": resources, "capacity": resources},
            })
        return out


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except OSError:
        return True
    return state != "Z"


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def _say(message: str) -> None:
    print(f"[realcluster] {message}", flush=True)


class ControlPlane:
    """One control plane whose files (PKI, etcd data, logs, kubeconfigs) live in ``state_dir``."""

    ORDER = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok",
             "kueue", "jobset")

    def __init__(self, state_dir: Path | str) -> None:
        self.dir = Path(state_dir)
        self.pki = self.dir / "pki"
        self.logs = self.dir / "logs"
        self.state_file = self.dir / "state.json"

    # ---- state -------------------------------------------------------------------------
    def state(self) -> dict:
        if self.state_file.exists():
            return json.loads(self.state_file.read_text())
        return {"pids": {}, "ports": {}}

    def _save(self, state: dict) -> None:
        tmp = self.state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(state, indent=2, sort_keys=True))
        tmp.replace(self.state_file)

    @property
    def admin_kubeconfig(self) -> Path:
        return self.dir / "admin.kubeconfig"

    @property
    def portal_kubeconfig(self) -> Path:
        return self.dir / "portal.kubeconfig"

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.state()['ports']['apiserver']}"

    def running(self) -> dict[str, int]:
        """Components whose recorded PID is alive (and still runs our binary)."""
        alive = {}
        for name, entry in self.state()["pids"].items():
            pid, binary = entry["pid"], entry["binary"]
            if _pid_alive(pid) and binary in _cmdline(pid):
                alive[name] = pid
        return alive

    def env(self) -> dict[str, str]:
        """What a shell (or the portal) needs to use this control plane."""
        return {"KUBECONFIG": str(self.portal_kubeconfig),
                "REALCLUSTER_ADMIN_KUBECONFIG": str(self.admin_kubeconfig),
                "REALCLUSTER_STATE": str(self.dir)}

    # ---- bring-up ----------------------------------------------------------------------
    def up(self, pools: Iterable[GpuNodePool] = (), *, build: bool = True,
           job_seconds: float | None = None) -> None:
        """Start everything not running yet (idempotent), then the nodes of ``pools``.

        ``job_seconds``: when given, KWOK also completes every Job pod that ran for
        that long (for a developer's demo); otherwise a Job pod completes only
        when annotated with :data:`COMPLETE_ANNOTATION` (tests decide).
        """
        missing = comp.missing()
        if missing:
            if not build:
                raise ControlPlaneError(f"not built: {', '.join(missing)} "
                                        "(run: python -m harness.realcluster build)")
            comp.build()
        self.dir.mkdir(parents=True, exist_ok=True)
        self.logs.mkdir(exist_ok=True)
        make_pki(self.pki)
        state = self.state()
        running = self.running()
        if running and "kube-apiserver" in running and len(running) == len(self.ORDER):
            _say(f"already running ({', '.join(running)}); state in {self.dir}")
            self.add_nodes(pools)
            return
        if running:
            self.down()
            state = self.state()
        ports = state.get("ports") or {}
        for name in ("etcd", "etcd_peer", "apiserver", "kwok", "kueue_webhook",
                     "kueue_health", "kueue_visibility", "jobset_webhook", "jobset_health"):
            ports.setdefault(name, free_port())
        state["ports"] = ports
        state["pids"] = {}
        self._save(state)
        t0 = time.monotonic()
        self._start_etcd()
        self._start_apiserver()
        self._write_kubeconfigs_for_components()
        self._wait_apiserver()
        self._install_crds()
        self._start("kube-controller-manager", comp.KUBERNETES, "kube-controller-manager",
                    self._kcm_args())
        self._start("kube-scheduler", comp.KUBERNETES, "kube-scheduler", [
            f"--kubeconfig={self.dir / 'kube-scheduler.kubeconfig'}",
            f"--authentication-kubeconfig={self.dir / 'kube-scheduler.kubeconfig'}",
            f"--authorization-kubeconfig={self.dir / 'kube-scheduler.kubeconfig'}",
            "--leader-elect=false", "--bind-address=127.0.0.1", "--secure-port=0", "--v=1"])
        self._start_kwok(job_seconds)
        self._start_kueue()
        self._start_jobset()
        self._apply_portal_rbac()
        self._write_portal_kubeconfig()
        _say(f"portal ServiceAccount token written ({time.monotonic() - t0:.0f} s)")
        self._wait_kueue_ready()
        _say(f"Kueue, its webhooks and visibility API ready ({time.monotonic() - t0:.0f} s)")
        self.add_nodes(pools)
        _say(f"up in {time.monotonic() - t0:.0f} s; "
             + " ".join(f"{k}={v}" for k, v in self.env().items()))

    def _start(self, name: str, component: comp.Component, binary: str, args: list[str],
               *, prefix: list[str] | None = None) -> int:
        path = component.binary(binary)
        log = (self.logs / f"{name}.log").open("ab")
        proc = subprocess.Popen([*(prefix or []), str(path), *args], stdout=log,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                cwd=self.dir, start_new_session=True)
        log.close()
        state = self.state()
        state["pids"][name] = {"pid": proc.pid, "binary": str(path)}
        self._save(state)
        _say(f"{name} started (pid {proc.pid}, log {self.logs / (name + '.log')})")
        return proc.pid

    def _fail(self, name: str, what: str) -> ControlPlaneError:
        log = self.logs / f"{name}.log"
        tail = ""
        if log.exists():
            tail = "\n".join(log.read_text(errors="replace").splitlines()[-25:])
        return ControlPlaneError(f"{name}: {what}\n--- last lines of {log} ---\n{tail}")

    def _alive_or_fail(self, name: str) -> None:
        entry = self.state()["pids"].get(name)
        if entry is None or not _pid_alive(entry["pid"]):
            raise self._fail(name, "exited")

    def _start_etcd(self) -> None:
        p = self.state()["ports"]
        client, peer = f"http://127.0.0.1:{p['etcd']}", f"http://127.0.0.1:{p['etcd_peer']}"
        self._start("etcd", comp.ETCD, "etcd", [
            "--name=realcluster", f"--data-dir={self.dir / 'etcd'}",
            f"--listen-client-urls={client}", f"--advertise-client-urls={client}",
            f"--listen-peer-urls={peer}", f"--initial-advertise-peer-urls={peer}",
            f"--initial-cluster=realcluster={peer}", "--unsafe-no-fsync",
            "--quota-backend-bytes=2147483648", "--log-level=warn"])
        self._wait_tcp("etcd", p["etcd"], 30)

    def _start_apiserver(self) -> None:
        p, pki = self.state()["ports"], self.pki
        self._start("kube-apiserver", comp.KUBERNETES, "kube-apiserver", [
            f"--etcd-servers=http://127.0.0.1:{p['etcd']}",
            "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
            f"--secure-port={p['apiserver']}",
            f"--tls-cert-file={pki / 'apiserver.crt'}",
            f"--tls-private-key-file={pki / 'apiserver.key'}",
            f"--client-ca-file={pki / 'ca.crt'}",
            "--authorization-mode=RBAC",
            "--anonymous-auth=false",
            f"--service-account-key-file={pki / 'sa.pub'}",
            f"--service-account-signing-key-file={pki / 'sa.key'}",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            "--service-cluster-ip-range=10.0.0.0/24",
            # The "kubernetes" Service's endpoints would be 127.0.0.1: refused by validation.
            "--endpoint-reconciler-type=none",
            # KWOK marks the nodes Ready; no node-lifecycle controller removes the
            # not-ready taint that this admission plugin would add at creation.
            "--disable-admission-plugins=TaintNodesByCondition",
            f"--requestheader-client-ca-file={pki / 'front-proxy-ca.crt'}",
            "--requestheader-allowed-names=front-proxy-client",
            "--requestheader-username-headers=X-Remote-User",
            "--requestheader-group-headers=X-Remote-Group",
            "--requestheader-extra-headers-prefix=X-Remote-Extra-",
            f"--proxy-client-cert-file={pki / 'front-proxy-client.crt'}",
            f"--proxy-client-key-file={pki / 'front-proxy-client.key'}",
            "--profiling=false", "--v=1"])

    def _kubeconfig(self, path: Path, user: dict) -> None:
        config = {
            "apiVersion": "v1", "kind": "Config", "current-context": "realcluster",
            "clusters": [{"name": "realcluster", "cluster": {
                "server": self.server, "certificate-authority": str(self.pki / "ca.crt")}}],
            "users": [{"name": "user", "user": user}],
            "contexts": [{"name": "realcluster",
                          "context": {"cluster": "realcluster", "user": "user"}}],
        }
        path.write_text(yaml.safe_dump(config, sort_keys=False))
        path.chmod(0o600)

    def _write_kubeconfigs_for_components(self) -> None:
        for name in ("admin", "kube-controller-manager", "kube-scheduler"):
            target = self.admin_kubeconfig if name == "admin" else self.dir / f"{name}.kubeconfig"
            self._kubeconfig(target, {"client-certificate": str(self.pki / f"{name}.crt"),
                                      "client-key": str(self.pki / f"{name}.key")})

    def _admin_session(self):
        import requests

        session = requests.Session()
        # REQUESTS_CA_BUNDLE (set on this machine) would win over session.verify.
        session.trust_env = False
        session.cert = (str(self.pki / "admin.crt"), str(self.pki / "admin.key"))
        session.verify = str(self.pki / "ca.crt")
        return session

    def _wait_apiserver(self, timeout: float = 120.0) -> None:
        session = self._admin_session()
        deadline = time.monotonic() + timeout
        last = ""
        while time.monotonic() < deadline:
            self._alive_or_fail("kube-apiserver")
            try:
                resp = session.get(f"{self.server}/readyz", timeout=5)
                if resp.status_code == 200:
                    return
                last = resp.text[-300:]
            except Exception as exc:  # noqa: BLE001 - not up yet
                last = str(exc)
            time.sleep(0.5)
        raise self._fail("kube-apiserver", f"/readyz not ok within {timeout:.0f} s: {last}")

    def _wait_tcp(self, name: str, port: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self._alive_or_fail(name)
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
                return
            time.sleep(0.2)
        raise self._fail(name, f"port {port} not listening within {timeout:.0f} s")

    # ---- talking to the apiserver as admin -------------------------------------------
    #: kind -> (API path prefix, plural, namespaced) of what the bring-up writes.
    PATHS = {
        "CustomResourceDefinition": ("/apis/apiextensions.k8s.io/v1", "customresourcedefinitions",
                                     False),
        "MutatingWebhookConfiguration": ("/apis/admissionregistration.k8s.io/v1",
                                         "mutatingwebhookconfigurations", False),
        "ValidatingWebhookConfiguration": ("/apis/admissionregistration.k8s.io/v1",
                                           "validatingwebhookconfigurations", False),
        "APIService": ("/apis/apiregistration.k8s.io/v1", "apiservices", False),
        "Namespace": ("/api/v1", "namespaces", False),
        "Node": ("/api/v1", "nodes", False),
        "Service": ("/api/v1", "services", True),
        "ServiceAccount": ("/api/v1", "serviceaccounts", True),
        "ClusterRole": ("/apis/rbac.authorization.k8s.io/v1", "clusterroles", False),
        "ClusterRoleBinding": ("/apis/rbac.authorization.k8s.io/v1", "clusterrolebindings",
                               False),
        "ResourceFlavor": ("/apis/kueue.x-k8s.io/v1beta2", "resourceflavors", False),
    }

    def path_of(self, obj: dict, *, named: bool = True) -> str:
        prefix, plural, namespaced = self.PATHS[obj["kind"]]
        meta = obj["metadata"]
        ns = f"/namespaces/{meta['namespace']}" if namespaced else ""
        return f"{self.server}{prefix}{ns}/{plural}" + (f"/{meta['name']}" if named else "")

    def rest(self, method: str, url: str, body: dict | None = None, *,
             content_type: str = "application/json", ok=(200, 201), timeout: float = 60):
        """One admin request (plain JSON over requests: big CRDs stay fast); the parsed body."""
        session = getattr(self, "_session", None) or self._admin_session()
        self._session = session
        resp = session.request(method, url, data=None if body is None else json.dumps(body),
                               headers={"Content-Type": content_type}, timeout=timeout)
        if resp.status_code not in ok:
            raise ControlPlaneError(f"{method} {url}: {resp.status_code} {resp.text[:500]}")
        return resp.json() if resp.content else {}

    def apply(self, objects: Iterable[dict]) -> None:
        """Server-side apply ``objects`` as admin (field manager ``realcluster``)."""
        for obj in objects:
            self.rest("PATCH", self.path_of(obj) + "?fieldManager=realcluster&force=true", obj,
                      content_type="application/apply-patch+yaml")

    # ---- CRDs and webhooks from the modules ------------------------------------------
    def _install_crds(self) -> None:
        kueue_dir, jobset_dir = comp.KUEUE.module_dir(), comp.JOBSET.module_dir()
        ca_bundle = _b64(self.pki / "ca.crt")
        crds = []
        for path in sorted((kueue_dir / "config/components/crd/bases").glob("*.yaml")):
            crd = yaml.safe_load(path.read_text())
            plural = crd["spec"]["names"]["plural"]
            if plural in KUEUE_CONVERTED_CRDS:
                port = self.state()["ports"]["kueue_webhook"]
                crd["spec"]["conversion"] = {"strategy": "Webhook", "webhook": {
                    "conversionReviewVersions": ["v1"], "clientConfig": {
                        "url": f"https://127.0.0.1:{port}/convert", "caBundle": ca_bundle}}}
            crds.append(crd)
        for path in sorted((jobset_dir / "config/components/crd/bases").glob("*.yaml")):
            crds.append(yaml.safe_load(path.read_text()))
        t0 = time.monotonic()
        for crd in crds:
            # A plain create: server-side apply of the big Workload CRD costs seconds.
            self.rest("POST", self.path_of(crd, named=False), crd, ok=(201, 409))
        t1 = time.monotonic()
        deadline = time.monotonic() + 90
        pending = {c["metadata"]["name"]: c for c in crds}
        while pending and time.monotonic() < deadline:
            for name, crd in list(pending.items()):
                conds = self.rest("GET", self.path_of(crd)).get("status", {}).get(
                    "conditions") or []
                if any(c["type"] == "Established" and c["status"] == "True" for c in conds):
                    pending.pop(name)
            time.sleep(0.3)
        if pending:
            raise ControlPlaneError(f"CRDs not established: {sorted(pending)}")
        # Established is not yet served: a list answers 503 "storage is (re)initializing".
        for crd in crds:
            spec = crd["spec"]
            version = next(v["name"] for v in spec["versions"] if v.get("storage"))
            url = f"{self.server}/apis/{spec['group']}/{version}/{spec['names']['plural']}?limit=1"
            while True:
                try:
                    self.rest("GET", url)
                    break
                except ControlPlaneError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.3)
        _say(f"{len(crds)} CRDs created in {t1 - t0:.0f} s, established and served in "
             f"{time.monotonic() - t1:.0f} s (Kueue {comp.KUEUE.version}, "
             f"JobSet {comp.JOBSET.version})")

    def _webhook_configs(self, manifests: Path, port: int, groups: set[str] | None,
                         prefix: str, patches: dict[str, dict] | None = None) -> list[dict]:
        ca_bundle = _b64(self.pki / "ca.crt")
        out = []
        for doc in yaml.safe_load_all(manifests.read_text()):
            if not doc:
                continue
            doc = copy.deepcopy(doc)
            hooks = []
            for hook in doc.get("webhooks", []):
                hook_groups = {g for rule in hook.get("rules", []) for g in rule["apiGroups"]}
                if groups is not None and not hook_groups & groups:
                    continue
                hook.update((patches or {}).get(hook["name"], {}))
                path = hook["clientConfig"]["service"]["path"]
                hook["clientConfig"] = {"url": f"https://127.0.0.1:{port}{path}",
                                        "caBundle": ca_bundle}
                hook["timeoutSeconds"] = 10
                hooks.append(hook)
            doc["metadata"] = {"name": f"{prefix}-{doc['metadata']['name']}"}
            doc["webhooks"] = hooks
            out.append(doc)
        return out

    # ---- the other components ----------------------------------------------------------
    def _kcm_args(self) -> list[str]:
        kubeconfig = self.dir / "kube-controller-manager.kubeconfig"
        controllers = ("job-controller", "namespace-controller", "resourcequota-controller",
                       "garbage-collector-controller", "serviceaccount-controller",
                       "serviceaccount-token-controller",
                       "root-ca-certificate-publisher-controller",
                       "pod-garbage-collector-controller", "ttl-after-finished-controller")
        return [f"--kubeconfig={kubeconfig}",
                f"--authentication-kubeconfig={kubeconfig}",
                f"--authorization-kubeconfig={kubeconfig}",
                f"--controllers={','.join(controllers)}",
                "--use-service-account-credentials=true",
                f"--service-account-private-key-file={self.pki / 'sa.key'}",
                f"--root-ca-file={self.pki / 'ca.crt'}",
                "--leader-elect=false", "--bind-address=127.0.0.1", "--secure-port=0",
                "--concurrent-job-syncs=5", "--v=1"]

    def _start_kwok(self, job_seconds: float | None) -> None:
        kwok_dir = comp.KWOK.module_dir()
        stages = [yaml.safe_load((kwok_dir / "kustomize/stage/node/fast/node-initialize.yaml")
                                 .read_text())]
        for name in ("pod-ready", "pod-delete"):
            stages.append(yaml.safe_load(
                (kwok_dir / f"kustomize/stage/pod/fast/{name}.yaml").read_text()))
        complete = yaml.safe_load((kwok_dir / "kustomize/stage/pod/fast/pod-complete.yaml")
                                  .read_text())
        # Job pods run until a test says they are done: the module's pod-complete stage,
        # limited to pods carrying our annotation.
        on_request = copy.deepcopy(complete)
        on_request["metadata"]["name"] = "pod-complete-on-request"
        on_request["spec"]["selector"]["matchExpressions"].append({
            "key": f'.metadata.annotations["{COMPLETE_ANNOTATION}"]', "operator": "In",
            "values": ["true"]})
        stages.append(on_request)
        if job_seconds is not None:
            timed = copy.deepcopy(complete)
            timed["metadata"]["name"] = "pod-complete-after"
            timed["spec"]["delay"] = {"durationMilliseconds": int(job_seconds * 1000)}
            stages.append(timed)
        path = self.dir / "kwok.yaml"
        path.write_text(yaml.safe_dump_all(stages, sort_keys=False))
        self._start("kwok", comp.KWOK, "kwok", [
            f"--kubeconfig={self.admin_kubeconfig}", f"--config={path}",
            "--manage-all-nodes=false",
            f"--manage-nodes-with-annotation-selector={KWOK_NODE_ANNOTATION}=fake",
            f"--server-address=127.0.0.1:{self.state()['ports']['kwok']}",
            "--cidr=10.244.0.0/16", "--node-ip=10.240.0.1"])

    def _kueue_prefix(self) -> list[str]:
        """Run Kueue in a private mount namespace where its fixed cert paths hold our certs."""
        visibility = serving_dir(self.pki, "kueue-visibility")
        metrics = serving_dir(self.pki, "kueue-metrics")
        for target in KUEUE_FIXED_CERT_DIRS:
            Path(target).mkdir(parents=True, exist_ok=True)
        script = (f"mount --bind {visibility} /visibility && "
                  f"mount --bind {metrics} /etc/kueue/metrics/certs && exec \"$@\"")
        return ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "kueue"]

    def _start_kueue(self) -> None:
        p = self.state()["ports"]
        webhook_dir = serving_dir(self.pki, "kueue-webhook")
        config = {
            "apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
            "health": {"healthProbeBindAddress": f"127.0.0.1:{p['kueue_health']}"},
            "metrics": {"bindAddress": "0"},
            "webhook": {"port": p["kueue_webhook"], "host": "127.0.0.1",
                        "certDir": str(webhook_dir)},
            "leaderElection": {"leaderElect": False},
            "internalCertManagement": {"enable": False},
            "visibilityServer": {"bindAddress": "127.0.0.1", "bindPort": p["kueue_visibility"]},
            "integrations": {"frameworks": ["batch/job", "jobset.x-k8s.io/jobset"]},
        }
        path = self.dir / "kueue.yaml"
        path.write_text(yaml.safe_dump(config, sort_keys=False))
        kueue_dir = comp.KUEUE.module_dir()
        hooks = self._webhook_configs(kueue_dir / "config/components/webhook/manifests.yaml",
                                      p["kueue_webhook"], KUEUE_WEBHOOK_GROUPS, "kueue")
        namespace = {"apiVersion": "v1", "kind": "Namespace",
                     "metadata": {"name": KUEUE_NAMESPACE}}
        # Kueue's visibility API, aggregated: an ExternalName Service lets the apiserver's
        # proxy reach a loopback port (Endpoints may not hold 127.0.0.1).
        service = {"apiVersion": "v1", "kind": "Service",
                   "metadata": {"name": "visibility-server", "namespace": KUEUE_NAMESPACE},
                   "spec": {"type": "ExternalName", "externalName": "localhost",
                            "ports": [{"name": "https", "port": p["kueue_visibility"],
                                       "protocol": "TCP"}]}}
        apiservices = []
        for path_ in sorted((kueue_dir / "config/components/visibility").glob("apiservice_*.yaml")):
            svc = yaml.safe_load(path_.read_text())
            svc["spec"]["service"]["port"] = p["kueue_visibility"]
            apiservices.append(svc)
        self.apply([namespace, service, *hooks])
        self._start("kueue", comp.KUEUE, "kueue", [
            f"--config={path}", f"--kubeconfig={self.admin_kubeconfig}",
            f"--visibility-server-port={p['kueue_visibility']}", "--zap-log-level=info"],
            prefix=self._kueue_prefix())
        self.apply(apiservices)

    def _start_jobset(self) -> None:
        p = self.state()["ports"]
        webhook_dir = serving_dir(self.pki, "jobset-webhook")
        config = {
            "apiVersion": "config.jobset.x-k8s.io/v1alpha1", "kind": "Configuration",
            "health": {"healthProbeBindAddress": f"127.0.0.1:{p['jobset_health']}"},
            "metrics": {"bindAddress": "0"},
            "webhook": {"port": p["jobset_webhook"], "host": "127.0.0.1",
                        "certDir": str(webhook_dir)},
            "leaderElection": {"leaderElect": False},
            "internalCertManagement": {"enable": False},
        }
        path = self.dir / "jobset.yaml"
        path.write_text(yaml.safe_dump(config, sort_keys=False))
        jobset_dir = comp.JOBSET.module_dir()
        # The module's kustomization narrows its pod webhooks to JobSet pods.
        pod_selector = {"objectSelector": {"matchExpressions": [
            {"key": "jobset.sigs.k8s.io/jobset-name", "operator": "Exists"}]}}
        hooks = self._webhook_configs(
            jobset_dir / "config/components/webhook/manifests.yaml", p["jobset_webhook"], None,
            "jobset", patches={"mpod.kb.io": pod_selector, "vpod.kb.io": pod_selector})
        self.apply(hooks)
        self._start("jobset", comp.JOBSET, "jobset", [
            f"--config={path}", f"--kubeconfig={self.admin_kubeconfig}"])

    def _wait_kueue_ready(self, timeout: float = 120.0) -> None:
        import requests

        p = self.state()["ports"]
        checks = {"kueue": f"http://127.0.0.1:{p['kueue_health']}/readyz",
                  "jobset": f"http://127.0.0.1:{p['jobset_health']}/readyz"}
        deadline = time.monotonic() + timeout
        for name, url in checks.items():
            last = ""
            while True:
                self._alive_or_fail(name)
                try:
                    resp = requests.get(url, timeout=2)
                    if resp.status_code == 200:
                        break
                    last = resp.text
                except requests.RequestException as exc:
                    last = str(exc)
                if time.monotonic() > deadline:
                    raise self._fail(name, f"{url} not ok within {timeout:.0f} s: {last}")
                time.sleep(0.3)
        # The aggregated visibility API answers through the apiserver.
        session = self._admin_session()
        url = f"{self.server}/apis/visibility.kueue.x-k8s.io/v1beta2"
        while True:
            self._alive_or_fail("kueue")
            last = ""
            try:
                resp = session.get(url, timeout=5)
                if resp.status_code == 200:
                    break
                last = f"{resp.status_code} {resp.text[:200]}"
            except Exception as exc:  # noqa: BLE001 - not up yet
                last = str(exc)
            if time.monotonic() > deadline:
                raise self._fail("kueue", f"visibility API not served through the apiserver: "
                                          f"{last}")
            time.sleep(0.5)
        # Kueue's webhooks answer (a dry-run create is defaulted and validated by them).
        while True:
            probe = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
                     "metadata": {"name": "realcluster-probe"}, "spec": {}}
            try:
                self.rest("POST", self.path_of(probe, named=False) + "?dryRun=All", probe)
                break
            except ControlPlaneError as exc:
                if time.monotonic() > deadline:
                    raise self._fail("kueue", f"webhooks not answering: {exc}") from exc
                time.sleep(0.5)

    # ---- the portal's identity -------------------------------------------------------
    def _apply_portal_rbac(self) -> None:
        docs = [d for d in yaml.safe_load_all(RBAC_YAML.read_text()) if d]
        self.apply(docs)

    def _write_portal_kubeconfig(self, hours: int = 48) -> None:
        """The portal ServiceAccount's token from the TokenRequest API, in a kubeconfig."""
        url = (f"{self.server}/api/v1/namespaces/{PORTAL_NAMESPACE}/serviceaccounts/"
               f"{PORTAL_SERVICE_ACCOUNT}/token")
        body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                "spec": {"expirationSeconds": hours * 3600}}
        deadline = time.monotonic() + 30
        while True:
            try:
                token = self.rest("POST", url, body)["status"]["token"]
                break
            except ControlPlaneError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
        self._kubeconfig(self.portal_kubeconfig, {"token": token})

    # ---- nodes -------------------------------------------------------------------------
    def add_nodes(self, pools: Iterable[GpuNodePool]) -> list[str]:
        """Create the KWOK nodes of ``pools`` (existing ones are kept); wait until Ready."""
        nodes = [n for pool in pools for n in pool.nodes()]
        for node in nodes:
            self.rest("POST", self.path_of(node, named=False), node, ok=(201, 409))
        names = [n["metadata"]["name"] for n in nodes]
        deadline = time.monotonic() + 60
        while names and time.monotonic() < deadline:
            ready = 0
            for node in nodes:
                conds = self.rest("GET", self.path_of(node)).get("status", {}).get(
                    "conditions") or []
                ready += any(c["type"] == "Ready" and c["status"] == "True" for c in conds)
            if ready == len(names):
                return names
            time.sleep(0.3)
        if names:
            raise self._fail("kwok", f"nodes not Ready within 60 s: {names}")
        return names

    def delete_nodes(self, names: Iterable[str]) -> None:
        for name in names:
            self.rest("DELETE", self.path_of({"kind": "Node", "metadata": {"name": name}}),
                      ok=(200, 202, 404))

    # ---- stopping ------------------------------------------------------------------------
    def stop(self, name: str, timeout: float = 15.0) -> None:
        """Stop one component by its recorded PID (SIGTERM, then SIGKILL)."""
        entry = self.state()["pids"].get(name)
        if not entry:
            return
        pid = entry["pid"]
        if _pid_alive(pid) and entry["binary"] in _cmdline(pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + timeout
            while _pid_alive(pid) and time.monotonic() < deadline:
                time.sleep(0.1)
            if _pid_alive(pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
                deadline = time.monotonic() + 10
                while _pid_alive(pid) and time.monotonic() < deadline:
                    time.sleep(0.05)
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(pid, os.WNOHANG)
        state = self.state()
        state["pids"].pop(name, None)
        self._save(state)

    def send_signal(self, name: str, sig: int) -> None:
        """Send ``sig`` to one component by its recorded PID (fault tests: SIGSTOP/SIGCONT)."""
        entry = self.state()["pids"][name]
        if entry["binary"] not in _cmdline(entry["pid"]):
            raise ControlPlaneError(f"{name} (pid {entry['pid']}) is not running")
        os.kill(entry["pid"], sig)

    def restart_apiserver(self) -> None:
        """Start kube-apiserver again (after :meth:`stop`) on the same port and wait for it."""
        port = self.state()["ports"]["apiserver"]
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:   # the old listener may linger a moment
            with socket.socket() as sock:
                try:
                    sock.bind(("127.0.0.1", port))
                    break
                except OSError:
                    time.sleep(0.2)
        self._start_apiserver()
        self._wait_apiserver()

    def down(self) -> None:
        """Stop every recorded component, in reverse start order. Idempotent."""
        if not self.state_file.exists():
            _say(f"nothing recorded in {self.dir}")
            return
        for name in reversed(self.ORDER):
            self.stop(name)
        _say(f"down ({self.dir})")


def _b64(path: Path) -> str:
    import base64

    return base64.b64encode(path.read_bytes()).decode()
