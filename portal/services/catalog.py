"""What staff onboard: clusters, GPU flavors, cohorts, priority classes."""

import dataclasses
from decimal import Decimal

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.db.models import F

from portal import access
from portal.backends import backend_for
from portal.models import Cluster, Cohort, GpuFlavor, PriorityClass
from portal.models.validators import validate_gpu_resource
from portal.services.audit import audit_record
from portal.services.fields import quantity_string, whole_count
from portal.services.outbox import cluster_spec_bump, reconcile_enqueue
from portal.services.teams import dns_label, queue_name_check, weight_value
from queues import quantity, specs
from queues.specs import SpecError

TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")

#: The largest quantity Kubernetes keeps exactly (int64 base units); a per-GPU sizing
#: above it cannot be multiplied by GPU counts into a quota.
QUANTITY_MAX = Decimal(2**63 - 1)


def _staff_only(actor, what: str) -> None:
    if not access.is_staff(actor):
        raise PermissionDenied(f"Only platform staff can create {what}.")


def _string_map(field: str, value) -> dict[str, str]:
    if value in (None, ""):
        return {}
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise ValidationError({field: "Expected an object of string keys and string values."})
    return dict(value)


def _taints(field: str, value) -> list[dict]:
    if value in (None, ""):
        return []
    if not isinstance(value, list):
        raise ValidationError({field: "Expected a list of {key, value?, effect}."})
    for index, taint in enumerate(value):
        if not isinstance(taint, dict) or not taint.get("key"):
            raise ValidationError({f"{field}[{index}]": "Each taint needs a key."})
        if taint.get("effect") not in TAINT_EFFECTS:
            raise ValidationError(
                {f"{field}[{index}].effect": f"Effect must be one of {', '.join(TAINT_EFFECTS)}."}
            )
    return value


def _spec_items(field: str, items: list, spec_class) -> tuple[list, dict[str, str]]:
    """Build ``spec_class`` (Taint, Toleration) from each dict of ``items``; errors by item."""
    known = {f.name for f in dataclasses.fields(spec_class)}
    built, errors = [], {}
    for index, item in enumerate(items):
        where = f"{field}[{index}]"
        if not isinstance(item, dict):
            errors[where] = f"Expected an object with keys {', '.join(sorted(known))}."
            continue
        unknown = sorted(set(item) - known)
        if unknown:
            errors[where] = (f"Unknown key(s) {', '.join(map(repr, unknown))}; "
                             f"expected {', '.join(sorted(known))}.")
            continue
        try:
            built.append(spec_class(**item))
        except SpecError as exc:
            errors[f"{where}.{exc.field}"] = exc.message
    return built, errors


def flavor_spec_check(*, name: str, gpu_resource: str, gpu_model: str, physical_gpus: int,
                      time_slicing_replicas: int, cpu_per_gpu: str, memory_per_gpu: str,
                      node_labels: dict, node_taints: list, tolerations: list) -> None:
    """Refuse flavor values that could not be rendered into a ResourceFlavor.

    Every flavor of a cluster is rendered for every reconcile, preview and job
    submission, so one unrenderable row would break them all: the values are checked
    with :class:`queues.specs.FlavorSpec` (label syntax, at most 8 labels, taints and
    tolerations by the core rules) and against the columns' lengths before anything is
    written. Raises :class:`ValidationError` naming the field (``node_taints[0].key``).
    """
    errors: dict[str, str] = {}
    for field, value in (("gpu_model", gpu_model), ("cpu_per_gpu", cpu_per_gpu),
                         ("memory_per_gpu", memory_per_gpu)):
        limit = GpuFlavor._meta.get_field(field).max_length
        if len(value or "") > limit:
            errors[field] = f"At most {limit} characters, got {len(value)}."
    for field, value in (("cpu_per_gpu", cpu_per_gpu), ("memory_per_gpu", memory_per_gpu)):
        try:
            too_big = quantity.parse(value) > QUANTITY_MAX
        except ValueError:
            continue  # quantity_string reports it
        if too_big and field not in errors:
            errors[field] = (f"'{value}' is more than Kubernetes can hold (2^63-1 base units); "
                             "quotas multiply it by GPU counts.")
    taints, taint_errors = _spec_items("node_taints", node_taints, specs.Taint)
    toleration_specs, toleration_errors = _spec_items("tolerations", tolerations,
                                                      specs.Toleration)
    errors.update(taint_errors)
    errors.update(toleration_errors)
    if not errors:
        try:
            specs.FlavorSpec(
                name=name, gpu_resource=gpu_resource, gpu_model=gpu_model or gpu_resource,
                node_labels=node_labels, node_taints=tuple(taints),
                tolerations=tuple(toleration_specs), physical_gpus=physical_gpus,
                time_slicing_replicas=time_slicing_replicas, cpu_per_gpu=cpu_per_gpu,
                memory_per_gpu=memory_per_gpu)
        except SpecError as exc:
            head = exc.field.split("[", 1)[0]
            errors[head] = exc.message if head == exc.field else f"{exc.field}: {exc.message}"
    if errors:
        raise ValidationError(errors)


@transaction.atomic
def cluster_create(*, actor, name: str, backend: str = "kueue", kube_context: str = "") -> Cluster:
    """Staff register a cluster. Raises ValidationError naming ``name`` or ``backend``."""
    _staff_only(actor, "clusters")
    dns_label("name", name)
    if backend not in Cluster.Backend.values:
        raise ValidationError({"backend": _unknown_backend(backend)})
    if Cluster.objects.filter(name=name).exists():
        raise ValidationError({"name": f"A cluster named '{name}' already exists."})
    cluster = Cluster.objects.create(name=name, backend=backend, kube_context=kube_context)
    audit_record(actor=actor, action="cluster.created", target=cluster,
                 after={"name": name, "backend": backend})
    return cluster


def backend_problems(*, cluster: Cluster, backend: str) -> dict[str, list[str]]:
    """What stops ``cluster`` from being rendered for ``backend``: ``{field: [messages]}``.

    Volcano needs whole team and cohort weights 1..65535 and distinct queue
    names (team slugs, cohort names, not ``root``/``default``). Two queries
    whatever the number of teams. Empty dict: nothing stops it.
    """
    problems: dict[str, list[str]] = {}
    if backend not in Cluster.Backend.values:
        return {"backend": [_unknown_backend(backend)]}
    scheduler = backend_for(backend)
    cohorts = list(Cohort.objects.filter(cluster=cluster).values_list("name", "weight"))
    teams = list(cluster.teams.values_list("slug", "weight"))
    names = {name for name, _ in cohorts} if scheduler.queue_names_shared else set()
    for what, rows in (("cohort", cohorts), ("team", teams)):
        for name, weight in rows:
            try:
                weight_value("weight", weight, backend=backend)
            except ValidationError as exc:
                problems.setdefault("backend", []).append(
                    f"{what} '{name}': {exc.message_dict['weight'][0]}")
            if name in scheduler.reserved_queue_names or (what == "team" and name in names):
                problems.setdefault("backend", []).append(
                    f"{what} '{name}': its name is taken by another {scheduler.label} queue.")
    return problems


def _unknown_backend(backend: str) -> str:
    return f"'{backend}' is not one of: {', '.join(Cluster.Backend.values)}."


@transaction.atomic
def cluster_backend_set(*, actor, cluster: Cluster, backend: str) -> Cluster:
    """Staff switch a cluster's scheduler backend (``kueue`` <-> ``volcano``).

    Validates first (:func:`backend_problems`: ValidationError naming
    ``backend``), then in one transaction changes the row, bumps the spec
    generation and, on commit, enqueues ``portal.reconcile_cluster``: the
    reconciler applies the new backend's objects and prunes the old backend's
    labelled ones (Namespaces and anything unlabelled stay).
    """
    _staff_only(actor, "scheduler backends")
    problems = backend_problems(cluster=cluster, backend=backend)
    if problems:
        raise ValidationError(problems)
    before = cluster.backend
    if before == backend:
        return cluster
    Cluster.objects.filter(pk=cluster.pk).update(backend=backend)
    cluster_spec_bump(cluster_id=cluster.pk)
    cluster.refresh_from_db()
    audit_record(actor=actor, action="cluster.backend_changed", target=cluster,
                 before={"backend": before}, after={"backend": backend})
    reconcile_enqueue(cluster_id=cluster.pk)
    return cluster


@transaction.atomic
def flavor_create(
    *, actor, cluster: Cluster, name: str, gpu_resource: str = "nvidia.com/gpu",
    gpu_model: str = "", physical_gpus=0, time_slicing_replicas=1, gpus_per_node=8,
    cpu_per_gpu: str = "8", memory_per_gpu: str = "64Gi", node_labels=None, node_taints=None,
    tolerations=None,
) -> GpuFlavor:
    """Staff add a GPU flavor (Kueue ResourceFlavor) to a cluster.

    ``physical_gpus`` counts physical GPUs; ``time_slicing_replicas`` >= 1;
    ``cpu_per_gpu``/``memory_per_gpu`` are quantities; labels, taints and
    tolerations must render (:func:`flavor_spec_check`). Raises ValidationError
    naming the field.
    """
    _staff_only(actor, "GPU flavors")
    dns_label("name", name)
    try:
        validate_gpu_resource(gpu_resource or "")
    except ValidationError as exc:
        raise ValidationError({"gpu_resource": exc.messages}) from exc
    physical = whole_count("physical_gpus", physical_gpus)
    replicas = whole_count("time_slicing_replicas", time_slicing_replicas)
    if replicas < 1:
        raise ValidationError({"time_slicing_replicas": "Must be 1 (no sharing) or more."})
    per_node = whole_count("gpus_per_node", gpus_per_node)
    if per_node < 1:
        raise ValidationError({"gpus_per_node": "Must be 1 or more."})
    quantity_string("cpu_per_gpu", cpu_per_gpu)
    quantity_string("memory_per_gpu", memory_per_gpu)
    labels = _string_map("node_labels", node_labels)
    taints = _taints("node_taints", node_taints)
    tolerations = tolerations or []
    if not isinstance(tolerations, list):
        raise ValidationError({"tolerations": "Expected a list of tolerations."})
    flavor_spec_check(name=name, gpu_resource=gpu_resource, gpu_model=gpu_model,
                      physical_gpus=physical, time_slicing_replicas=replicas,
                      cpu_per_gpu=cpu_per_gpu, memory_per_gpu=memory_per_gpu,
                      node_labels=labels, node_taints=taints, tolerations=tolerations)
    if GpuFlavor.objects.filter(cluster=cluster, name=name).exists():
        raise ValidationError({"name": f"Flavor '{name}' already exists in '{cluster.name}'."})
    flavor = GpuFlavor.objects.create(
        cluster=cluster, name=name, gpu_resource=gpu_resource, gpu_model=gpu_model,
        physical_gpus=physical, time_slicing_replicas=replicas, gpus_per_node=per_node,
        cpu_per_gpu=cpu_per_gpu, memory_per_gpu=memory_per_gpu, node_labels=labels,
        node_taints=taints, tolerations=tolerations,
    )
    cluster_spec_bump(cluster_id=cluster.pk)
    audit_record(actor=actor, action="flavor.created", target=flavor,
                 after={"name": name, "gpu_resource": gpu_resource, "physical_gpus": physical})
    return flavor


@transaction.atomic
def cohort_create(
    *, actor, cluster: Cluster, name: str, parent: Cohort | None = None, weight=Decimal("1")
) -> Cohort:
    """Staff add a cohort (department). Raises ValidationError naming the field.

    On a Volcano cluster the weight must be a whole number 1..65535 and the
    name must not be a team's slug (both become Volcano Queues).
    """
    _staff_only(actor, "cohorts")
    dns_label("name", name)
    weight = weight_value("weight", weight, backend=cluster.backend)
    if parent is not None and parent.cluster_id != cluster.pk:
        raise ValidationError({"parent": f"Cohort '{parent.name}' is in another cluster."})
    if Cohort.objects.filter(cluster=cluster, name=name).exists():
        raise ValidationError({"name": f"Cohort '{name}' already exists in '{cluster.name}'."})
    queue_name_check("name", name, cluster=cluster)
    cohort = Cohort.objects.create(cluster=cluster, name=name, parent=parent, weight=weight)
    cluster_spec_bump(cluster_id=cluster.pk)
    audit_record(actor=actor, action="cohort.created", target=cohort,
                 after={"name": name, "parent": parent.name if parent else None,
                        "weight": str(weight)})
    return cohort


@transaction.atomic
def priority_class_create(*, actor, name: str, value: int, description: str = "") -> PriorityClass:
    """Staff add a priority class (WorkloadPriorityClass / PriorityClass)."""
    _staff_only(actor, "priority classes")
    dns_label("name", name)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValidationError({"value": f"{value!r} is not a whole number."})
    if not -2_000_000_000 <= value <= 1_000_000_000:
        raise ValidationError({"value": "Must be between -2000000000 and 1000000000."})
    if PriorityClass.objects.filter(name=name).exists():
        raise ValidationError({"name": f"Priority class '{name}' already exists."})
    pc = PriorityClass.objects.create(name=name, value=value, description=description)
    Cluster.objects.update(spec_generation=F("spec_generation") + 1)
    audit_record(actor=actor, action="priority_class.created", target=pc,
                 after={"name": name, "value": value})
    return pc
