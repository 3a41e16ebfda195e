"""The backend registry and the SchedulerBackend interface each backend implements."""

import inspect

import pytest

from queues import backends
from queues.backends import SchedulerBackend
from queues.backends.base import CancelStep, JobRef
from queues.jobs import JobSpec
from queues.specs import FlavorSpec

SPEC = JobSpec(namespace="vision", name="train", image="ghcr.io/acme/train:1", workers=2,
               gpus_per_worker=4, gpu_resource="nvidia.com/gpu", flavor="h100",
               cpu_per_worker="8", memory_per_worker="64Gi", local_queue="vision",
               job_label="7")
FLAVOR = FlavorSpec(name="h100", gpu_resource="nvidia.com/gpu", gpu_model="H100",
                    node_labels={"nvidia.com/gpu.product": "H100"})
PROTOCOL_METHODS = sorted(
    name for name, member in vars(SchedulerBackend).items()
    if inspect.isfunction(member) and not name.startswith("_"))


def _parameters(function) -> list[str]:
    return [p for p in inspect.signature(function).parameters if p != "self"]


def test_the_registry_names_each_backend_once():
    assert backends.names() == ("kueue", "volcano")
    assert backends.choices() == [("kueue", "Kueue"), ("volcano", "Volcano")]
    assert backends.DEFAULT in backends.names()
    with pytest.raises(ValueError, match="unknown scheduler backend 'slurm'; one of: kueue"):
        backends.get("slurm")


@pytest.mark.parametrize("name", backends.names())
def test_each_backend_implements_the_whole_interface(name):
    backend = backends.get(name)
    assert isinstance(backend, SchedulerBackend)
    assert backend.name == name
    for method in PROTOCOL_METHODS:
        ours = _parameters(getattr(type(backend), method))
        assert ours == _parameters(getattr(SchedulerBackend, method)), (name, method)


@pytest.mark.parametrize("name", backends.names())
def test_a_rendered_job_leads_back_to_its_backend(name):
    backend = backends.get(name)
    manifest = backend.render_job(SPEC, flavor=FLAVOR)
    assert backends.of_manifest(manifest) is backend
    ref = JobRef.of(manifest, uid="u-1", job_id="7")
    assert (ref.name, ref.namespace, ref.uid) == ("train", "vision", "u-1")


def test_an_unknown_manifest_has_no_backend():
    with pytest.raises(ValueError, match="apiVersion 'v1'"):
        backends.of_manifest({"apiVersion": "v1", "kind": "Pod"})


def test_managed_kinds_are_every_backends_kinds_once_in_apply_order():
    kinds = backends.MANAGED_KINDS
    assert len(kinds) == len(set(kinds))
    for backend in backends.BACKENDS.values():
        assert set(backend.managed_kinds) <= set(kinds)
        positions = [kinds.index(k) for k in backend.managed_kinds]
        assert positions == sorted(positions), backend.name


def test_volcano_adds_its_rules_kueue_none():
    from decimal import Decimal

    kueue, volcano = backends.get("kueue"), backends.get("volcano")
    assert kueue.weight_problem(Decimal("1.5"), "1.5") is None
    assert "not a whole number" in volcano.weight_problem(Decimal("1.5"), "1.5")
    assert "larger than 65535" in volcano.weight_problem(Decimal("70000"), "70000")
    assert volcano.weight_problem(Decimal("3"), "3") is None
    assert (kueue.reserved_queue_names, volcano.reserved_queue_names) == (
        frozenset(), frozenset({"root", "default"}))


def test_queue_refusal_only_where_a_queue_can_close():
    closed = {"metadata": {"name": "vision"}, "status": {"state": "Closed"}}
    assert backends.get("kueue").team_queue("vision") is None
    volcano = backends.get("volcano")
    assert volcano.team_queue("vision") == ("scheduling.volcano.sh/v1beta1", "Queue", "",
                                            "vision")
    assert "is closed" in volcano.queue_refusal(closed)
    assert volcano.queue_refusal(None) is None  # not observed yet: no refusal


class _Port:
    """A cluster port that serves one vcjob and records what is sent."""

    def __init__(self, phase):
        self.live = {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
                     "metadata": {"name": "train", "namespace": "vision", "uid": "u-1"},
                     "status": {"state": {"phase": phase}}}
        self.sent, self.deleted = [], []

    def get(self, api_version, kind, name, namespace=None):
        return self.live

    def issue_command(self, command):
        self.sent.append(command["action"])

    def delete_background(self, *key):
        self.deleted.append(key)
        return True


@pytest.mark.parametrize(("phase", "step", "sent", "deleted"), [
    ("Running", "aborting", ["AbortJob"], False),
    ("Aborting", "aborting", [], False),
    ("Aborted", "cancelled", ["TerminateJob"], True),
    ("Completed", "cancelled", [], True),
])
def test_volcano_cancels_in_two_level_triggered_steps(phase, step, sent, deleted):
    port = _Port(phase)
    ref = JobRef("batch.volcano.sh/v1alpha1", "Job", "train", "vision")
    result = backends.get("volcano").cancel(port, ref)
    assert isinstance(result, CancelStep)
    assert (result.step, port.sent, bool(port.deleted)) == (step, sent, deleted)
    assert result.done == (step == "cancelled")
