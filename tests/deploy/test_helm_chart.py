"""The Helm chart (deploy/helm/gpu-quota-portal) with the real helm binary.

``helm lint`` (strict), ``helm template`` with the default values, the full values
file (``ci/full-values.yaml``: every optional part on) and an existing Secret; every
rendered object validated against the Kubernetes schemas (``tests.schema``:
kubernetes-validate, strict); the properties the issue asks of the workloads; and
``deploy/rbac.yaml`` in sync with the chart's RBAC, which is its one source.

Server-side dry-run (``helm install --dry-run=server``) against the real control
plane belongs to the real-cluster tier: :func:`server_dry_run` is the hook it calls
with a kubeconfig once that tier exists.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from tests.schema import validate_manifest
from tests.services import REPO_ROOT

CHART = REPO_ROOT / "deploy" / "helm" / "gpu-quota-portal"
FULL_VALUES = CHART / "ci" / "full-values.yaml"
RBAC_FILE = REPO_ROOT / "deploy" / "rbac.yaml"
RULES_FILE = CHART / "files" / "clusterrole-rules.yaml"
RELEASE = "gpu-quota-portal"
NAMESPACE = "gpu-quota-portal"
HOOK = "helm.sh/hook"

#: Value sets rendered by the tests: name -> extra helm arguments.
VALUE_SETS = {
    "default": [],
    "full": ["--values", str(FULL_VALUES)],
    "existing-secret": ["--set", "secrets.existingSecret=portal-env",
                        "--set", "web.replicas=1", "--set", "rbac.create=false",
                        "--set", "serviceAccount.create=false",
                        "--set", "serviceAccount.name=portal-runner"],
}


def helm(helm_bin: Path, *args: str) -> str:
    proc = subprocess.run([str(helm_bin), *args], capture_output=True, text=True,
                          timeout=120, env={"HOME": "/tmp", "PATH": "/usr/bin:/bin",
                                            "HELM_CACHE_HOME": "/tmp/helm-cache",
                                            "HELM_CONFIG_HOME": "/tmp/helm-config",
                                            "HELM_DATA_HOME": "/tmp/helm-data"})
    assert proc.returncode == 0, f"helm {' '.join(args)} failed:\n{proc.stderr}{proc.stdout}"
    return proc.stdout


def render(helm_bin: Path, value_set: str = "default", *extra: str) -> list[dict]:
    out = helm(helm_bin, "template", RELEASE, str(CHART), "--namespace", NAMESPACE,
               *VALUE_SETS[value_set], *extra)
    return [doc for doc in yaml.safe_load_all(out) if doc]


def by_name(docs: list[dict]) -> dict[tuple[str, str], dict]:
    return {(doc["kind"], doc["metadata"]["name"]): doc for doc in docs}


def containers(doc: dict) -> list[dict]:
    spec = doc["spec"]["template"]["spec"]
    return spec.get("initContainers", []) + spec["containers"]


def server_dry_run(helm_bin: Path, kubeconfig: Path, value_set: str = "default") -> str:
    """``helm install --dry-run=server`` of the chart against the cluster of ``kubeconfig``.

    The hook for the real-cluster tier: the API server then admits (and its
    validation and admission chain checks) every object without storing it. Not
    run here: the API emulator of the other tiers is not an admission chain.
    """
    return helm(helm_bin, "install", RELEASE, str(CHART), "--namespace", NAMESPACE,
                "--create-namespace", "--dry-run=server", "--kubeconfig", str(kubeconfig),
                *VALUE_SETS[value_set])


def test_helm_is_the_pinned_version(helm_bin):
    from tests.helm import version

    assert version().startswith("v4.")
    assert helm(helm_bin, "version", "--template", "{{.Version}}").strip() == version()


@pytest.mark.parametrize("value_set", ["default", "full"])
def test_lint_strict(helm_bin, value_set):
    out = helm(helm_bin, "lint", "--strict", str(CHART), "--namespace", NAMESPACE,
               *VALUE_SETS[value_set])
    assert "0 chart(s) failed" in out


@pytest.mark.parametrize("value_set", list(VALUE_SETS))
def test_every_rendered_object_validates(helm_bin, value_set):
    docs = render(helm_bin, value_set)
    assert docs
    for doc in docs:
        try:
            validate_manifest(doc)
        except Exception as error:
            pytest.fail(f"{doc['kind']}/{doc['metadata']['name']} ({value_set}): {error}")


def test_default_render_has_the_issue_objects(helm_bin):
    objects = by_name(render(helm_bin))
    assert sorted(objects) == sorted([
        ("ClusterRole", RELEASE), ("ClusterRoleBinding", RELEASE),
        ("ConfigMap", f"{RELEASE}-migrate"), ("ConfigMap", f"{RELEASE}-settings"),
        ("Deployment", f"{RELEASE}-beat"), ("Deployment", f"{RELEASE}-web"),
        ("Deployment", f"{RELEASE}-worker"), ("Job", f"{RELEASE}-migrate"),
        ("PodDisruptionBudget", f"{RELEASE}-web"), ("Secret", f"{RELEASE}-env"),
        ("Secret", f"{RELEASE}-migrate"), ("Service", RELEASE), ("ServiceAccount", RELEASE),
    ])
    assert not any(kind == "Ingress" for kind, _ in objects)  # optional, off by default


def test_full_render_adds_ingress_and_kubeconfig(helm_bin):
    objects = by_name(render(helm_bin, "full"))
    ingress = objects[("Ingress", "gpu-portal")]
    rule = ingress["spec"]["rules"][0]
    assert rule["host"] == "gpu-portal.example.com"
    assert rule["http"]["paths"][0]["backend"]["service"] == {
        "name": "gpu-portal", "port": {"name": "http"}}
    assert ingress["spec"]["tls"][0]["secretName"] == "gpu-portal-tls"
    settings = objects[("ConfigMap", "gpu-portal-settings")]["data"]
    assert settings["KUBECONFIG"] == "/etc/portal/kubeconfig/config"
    assert settings["KUBE_CONTEXT"] == "gpu-cluster"
    assert settings["SCHEDULER_BACKEND"] == "volcano"
    assert settings["IDLE_GRACE_HOURS"] == "12"
    for component in ("web", "worker"):
        pod = objects[("Deployment", f"gpu-portal-{component}")]["spec"]["template"]["spec"]
        assert pod["serviceAccountName"] == "gpu-portal-runner"
        volumes = {v["name"]: v for v in pod["volumes"]}
        assert volumes["kubeconfig"]["secret"]["secretName"] == "gpu-cluster-kubeconfig"
        mounts = {m["name"]: m for m in pod["containers"][0]["volumeMounts"]}
        assert mounts["kubeconfig"] == {"name": "kubeconfig", "readOnly": True,
                                        "mountPath": "/etc/portal/kubeconfig"}
    beat = objects[("Deployment", "gpu-portal-beat")]["spec"]["template"]["spec"]
    assert "kubeconfig" not in {v["name"] for v in beat["volumes"]}
    assert objects[("ClusterRoleBinding", "gpu-portal")]["subjects"] == [
        {"kind": "ServiceAccount", "name": "gpu-portal-runner", "namespace": NAMESPACE}]
    secret = objects[("Secret", "gpu-portal-env")]["stringData"]
    assert secret["METRICS_TOKEN"] == "prometheus-scrape-token"
    assert secret["EMAIL_HOST_PASSWORD"] == "smtp-password"
    assert objects[("PodDisruptionBudget", "gpu-portal-web")]["spec"]["minAvailable"] == 2


@pytest.mark.parametrize("value_set", list(VALUE_SETS))
def test_workloads_are_non_root_read_only_with_requests(helm_bin, value_set):
    docs = render(helm_bin, value_set)
    workloads = [d for d in docs if d["kind"] in ("Deployment", "Job")]
    assert len(workloads) == 4
    for doc in workloads:
        pod = doc["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert pod["securityContext"]["runAsUser"] != 0
        assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        assert {"name": "tmp", "emptyDir": {}} in pod["volumes"]
        for container in containers(doc):
            where = f"{doc['metadata']['name']}/{container['name']}"
            context = container["securityContext"]
            assert context["readOnlyRootFilesystem"] is True, where
            assert context["allowPrivilegeEscalation"] is False, where
            assert context["capabilities"] == {"drop": ["ALL"]}, where
            assert {"cpu", "memory"} <= set(container["resources"]["requests"]), where
            assert {"name": "tmp", "mountPath": "/tmp"} in container["volumeMounts"], where
            refs = [next(iter(ref.values()))["name"] for ref in container["envFrom"]]
            assert len(refs) == 2, where


@pytest.mark.parametrize("value_set", list(VALUE_SETS))
def test_web_probes_healthz_with_an_allowed_host(helm_bin, value_set):
    docs = render(helm_bin, value_set)
    web = next(d for d in docs if d["kind"] == "Deployment"
               and d["metadata"]["labels"]["app.kubernetes.io/component"] == "web")
    container = web["spec"]["template"]["spec"]["containers"][0]
    allowed = next(d for d in docs if d["kind"] == "ConfigMap"
                   and d["metadata"]["name"].endswith("-settings"))["data"]["ALLOWED_HOSTS"]
    for probe in ("readinessProbe", "livenessProbe"):
        get = container[probe]["httpGet"]
        assert get["path"] == "/healthz" and get["port"] == "http"
        host = {h["name"]: h["value"] for h in get["httpHeaders"]}["Host"]
        assert host in allowed.split(",")
    assert container["command"][:2] == ["gunicorn", "portal.wsgi"]


def test_each_process_runs_its_command(helm_bin):
    objects = by_name(render(helm_bin))
    commands = {name: containers(doc)[0]["command"] for (kind, name), doc in objects.items()
                if kind in ("Deployment", "Job")}
    assert commands[f"{RELEASE}-worker"][:3] == ["celery", "--app=portal", "worker"]
    assert commands[f"{RELEASE}-beat"][:3] == ["celery", "--app=portal", "beat"]
    assert commands[f"{RELEASE}-migrate"] == ["python", "manage.py", "migrate", "--noinput"]
    beat = objects[("Deployment", f"{RELEASE}-beat")]["spec"]
    assert beat["replicas"] == 1 and beat["strategy"] == {"type": "Recreate"}
    assert beat["template"]["spec"]["automountServiceAccountToken"] is False


def test_migration_job_is_a_pre_install_and_pre_upgrade_hook_with_its_settings(helm_bin):
    docs = render(helm_bin)
    hooks = {(d["kind"], d["metadata"]["name"]): d["metadata"]["annotations"]
             for d in docs if HOOK in d["metadata"].get("annotations", {})}
    assert sorted(hooks) == [("ConfigMap", f"{RELEASE}-migrate"), ("Job", f"{RELEASE}-migrate"),
                             ("Secret", f"{RELEASE}-migrate")]
    for notes in hooks.values():
        assert notes[HOOK] == "pre-install,pre-upgrade"
    # Its settings exist before it runs (lower weight), and every hook is removed once done.
    job_weight = int(hooks[("Job", f"{RELEASE}-migrate")]["helm.sh/hook-weight"])
    for key, notes in hooks.items():
        assert "hook-succeeded" in notes["helm.sh/hook-delete-policy"]
        if key[0] != "Job":
            assert int(notes["helm.sh/hook-weight"]) < job_weight
    objects = by_name(docs)
    job = objects[("Job", f"{RELEASE}-migrate")]["spec"]["template"]["spec"]
    assert job["restartPolicy"] == "Never"
    assert job["automountServiceAccountToken"] is False
    settings = objects[("ConfigMap", f"{RELEASE}-settings")]["data"]
    assert objects[("ConfigMap", f"{RELEASE}-migrate")]["data"] == settings
    env = objects[("Secret", f"{RELEASE}-env")]["stringData"]
    migrate_env = objects[("Secret", f"{RELEASE}-migrate")]["stringData"]
    assert {k: v for k, v in migrate_env.items() if k != "SECRET_KEY"} == {
        k: v for k, v in env.items() if k != "SECRET_KEY"}


def test_settings_are_production_settings(helm_bin):
    objects = by_name(render(helm_bin))
    settings = objects[("ConfigMap", f"{RELEASE}-settings")]["data"]
    assert settings["DEBUG"] == "false"
    assert settings["LOG_FORMAT"] == "json"
    assert settings["KUBECONFIG"] == ""  # in-cluster: the ServiceAccount
    env = objects[("Secret", f"{RELEASE}-env")]["stringData"]
    assert set(env) == {"SECRET_KEY", "DATABASE_URL", "REDIS_URL", "METRICS_TOKEN"}
    assert len(env["SECRET_KEY"]) >= 50
    # A second render makes another random key: `lookup` keeps the installed one on
    # upgrades (there is no cluster to look in here).
    again = by_name(render(helm_bin))[("Secret", f"{RELEASE}-env")]["stringData"]
    assert again["SECRET_KEY"] != env["SECRET_KEY"]


def test_existing_secret_is_referenced_and_no_secret_is_made(helm_bin):
    docs = render(helm_bin, "existing-secret")
    assert not [d for d in docs if d["kind"] == "Secret"]
    assert not [d for d in docs if d["kind"].startswith("ClusterRole")]
    assert not [d for d in docs if d["kind"] == "ServiceAccount"]
    assert not [d for d in docs if d["kind"] == "PodDisruptionBudget"]  # one web replica
    for doc in docs:
        if doc["kind"] in ("Deployment", "Job"):
            refs = [ref["secretRef"]["name"] for c in containers(doc)
                    for ref in c["envFrom"] if "secretRef" in ref]
            assert refs == ["portal-env"], doc["metadata"]["name"]
    web = next(d for d in docs if d["metadata"]["name"] == f"{RELEASE}-web")
    assert web["spec"]["template"]["spec"]["serviceAccountName"] == "portal-runner"


def test_a_missing_database_url_is_refused(helm_bin):
    proc = subprocess.run([str(helm_bin), "template", RELEASE, str(CHART),
                           "--set", "secrets.databaseUrl="], capture_output=True, text=True,
                          timeout=120, env={"HOME": "/tmp", "PATH": "/usr/bin:/bin"})
    assert proc.returncode != 0
    assert "secrets.databaseUrl is required" in proc.stderr


# ---- deploy/rbac.yaml and the chart: one source --------------------------------------


def rbac_file_rules_block() -> str:
    """The ``rules:`` block of deploy/rbac.yaml's ClusterRole, dedented, comments kept."""
    lines = RBAC_FILE.read_text().splitlines()
    start = lines.index("rules:") + 1
    end = next(i for i in range(start, len(lines)) if lines[i] == "---")
    block = lines[start:end]
    assert all(not line or line.startswith("  ") for line in block)
    return "\n".join(line[2:] for line in block).strip() + "\n"


def test_rbac_file_has_the_chart_rules_verbatim():
    """deploy/rbac.yaml's rules are files/clusterrole-rules.yaml, comments and all.

    To change a rule, edit files/clusterrole-rules.yaml and paste it (indented by two)
    under ``rules:`` in deploy/rbac.yaml.
    """
    assert rbac_file_rules_block() == RULES_FILE.read_text().strip() + "\n", (
        "deploy/rbac.yaml's ClusterRole rules differ from the chart's "
        "files/clusterrole-rules.yaml: copy the chart's file under `rules:` (indented by two)")


def test_chart_rbac_renders_what_deploy_rbac_yaml_applies(helm_bin):
    """With release and namespace ``gpu-quota-portal`` the chart's ServiceAccount,
    ClusterRole and ClusterRoleBinding are deploy/rbac.yaml's (labels aside: the chart
    adds Helm's), and the Namespace the file creates is the release's."""
    from_file = {(d["kind"], d["metadata"]["name"]): d
                 for d in yaml.safe_load_all(RBAC_FILE.read_text()) if d}
    rendered = by_name(render(helm_bin, "default", "--show-only", "templates/rbac.yaml",
                              "--show-only", "templates/serviceaccount.yaml"))
    assert sorted(rendered) == sorted(k for k in from_file if k[0] != "Namespace")
    assert from_file[("Namespace", NAMESPACE)]
    for key, doc in rendered.items():
        expected = from_file[key]
        for field in ("rules", "roleRef", "subjects"):
            assert doc.get(field) == expected.get(field), f"{key} {field}"
        assert doc["metadata"].get("namespace") == expected["metadata"].get("namespace")
        for label, value in expected["metadata"]["labels"].items():
            assert doc["metadata"]["labels"][label] == value, f"{key} label {label}"
