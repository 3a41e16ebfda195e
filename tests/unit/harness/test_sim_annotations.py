"""The ``sim.portal.gpu/*`` job annotations and the simulated cluster's pure helpers
(node pools, clock) of ``harness.sim.controller``."""

import dataclasses

import pytest

from harness.sim.annotations import sim_annotations
from harness.sim.controller import SimClock, derive_kueue_pools, pools_from_json
from queues.backends.kueue import objects as render_kueue
from queues.backends.kueue.jobs import render_kueue_job
from queues.backends.volcano.jobs import render_volcano_job
from queues.jobs import JobSpec
from queues.specs import CohortSpec, FlavorQuota, FlavorSpec, SpecError, TeamQueueSpec
from tests.schema import validate_manifest

SPEC = JobSpec(namespace="vision", name="train", image="ghcr.io/acme/train:1", workers=2,
               gpus_per_worker=4, gpu_resource="nvidia.com/gpu", flavor="h100",
               cpu_per_worker="8", memory_per_worker="64Gi", local_queue="vision",
               job_label="7")


def test_sim_annotations_only_what_is_given_sorted():
    assert sim_annotations() == ()
    assert sim_annotations(duration_seconds=90, outcome="Failed", profile="notebook") == (
        ("sim.portal.gpu/duration-seconds", "90"),
        ("sim.portal.gpu/outcome", "Failed"),
        ("sim.portal.gpu/profile", "notebook"),
    )


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"duration_seconds": 0}, "sim_duration_seconds"),
    ({"duration_seconds": 1.5}, "sim_duration_seconds"),
    ({"outcome": "Done"}, "sim_outcome"),
    ({"profile": "gaming"}, "sim_profile"),
])
def test_sim_annotations_refuse_bad_values_naming_the_field(kwargs, field):
    with pytest.raises(SpecError) as exc:
        sim_annotations(**kwargs)
    assert exc.value.field == field


def test_annotations_are_rendered_only_when_set_and_stay_schema_valid():
    assert "annotations" not in render_kueue_job(SPEC)["metadata"]
    spec = dataclasses.replace(SPEC, annotations=sim_annotations(duration_seconds=30,
                                                                 profile="inference"))
    for manifest in (render_kueue_job(spec),
                     render_kueue_job(dataclasses.replace(spec, kind="jobset")),
                     render_volcano_job(spec)):
        assert manifest["metadata"]["annotations"] == {
            "sim.portal.gpu/duration-seconds": "30", "sim.portal.gpu/profile": "inference"}
        validate_manifest(manifest)


@pytest.mark.parametrize(("annotations", "field"), [
    ({"bad key!": "x"}, "annotations[0].key"),
    ({"a": 1}, "annotations[0].value"),
    ((("a",),), "annotations[0]"),
])
def test_job_spec_checks_annotations(annotations, field):
    with pytest.raises(SpecError) as exc:
        dataclasses.replace(SPEC, annotations=annotations)
    assert exc.value.field == field


def test_pools_from_json_counts_mig_instances_per_physical_gpu():
    pools, labels = pools_from_json([
        {"flavor": "h100", "gpus": 64, "gpus_per_node": 8, "gpu_model": "H100",
         "node_labels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}},
        {"flavor": "mig", "gpu_resource": "nvidia.com/mig-1g.10gb", "gpus": 8},
        {"flavor": "empty", "gpus": 0},
    ])
    h100, mig = pools
    assert (h100.nodes, h100.units_per_node, h100.total_units) == (8, 8, 64)
    assert (mig.nodes, mig.units_per_node, mig.mig_profile, mig.mig_instances_per_gpu) == (
        1, 56, "1g.10gb", 7)
    assert labels == {"h100": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}, "mig": {}}
    with pytest.raises(SpecError) as exc:
        pools_from_json([{"gpus": 1}])
    assert exc.value.field == "pools[0]"


def test_kueue_pools_cover_every_nominal_quota_of_a_flavor():
    h100 = FlavorSpec(name="h100", gpu_resource="nvidia.com/gpu", gpu_model="H100",
                      node_labels={"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"})
    teams = [TeamQueueSpec(slug=slug, display_name=slug, cohort="research", quotas=(
        FlavorQuota(flavor="h100", gpu_resource="nvidia.com/gpu", nominal_gpus=n),))
        for slug, n in (("a", 12), ("b", 8))]
    objects = render_kueue.desired_objects(flavors=[h100], cohorts=[CohortSpec(name="research")],
                                           teams=teams)
    kinds = {kind: [o for o in objects if o["kind"] == kind]
             for kind in ("ResourceFlavor", "ClusterQueue", "Cohort")}
    pools, labels = derive_kueue_pools(kinds["ResourceFlavor"], kinds["ClusterQueue"],
                                       kinds["Cohort"])
    assert [(p.flavor, p.total_units, p.gpu_model) for p in pools] == [
        ("h100", 24, "NVIDIA H100 80GB HBM3")]
    assert labels == {"h100": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}}


def test_sim_clock_runs_speed_times_faster():
    now = [100.0]
    clock = SimClock(4, monotonic=lambda: now[0])
    now[0] = 102.5
    assert clock.now() == 10.0
    for bad in (0, -1, float("inf"), True):
        with pytest.raises(SpecError):
            SimClock(bad)


def test_the_portals_deprecated_fields_name_the_simulators_annotations():
    """The deprecated sim_* submit fields (portal) become the annotations the simulated
    cluster reads (harness): the two lists, kept apart by the layering, agree."""
    from harness.sim import annotations as sim
    from portal.services.jobs import _SIM_OUTCOMES, _SIM_PROFILES, DEPRECATED_SIM_FIELDS

    assert DEPRECATED_SIM_FIELDS == {"sim_duration_seconds": sim.SIM_DURATION_ANNOTATION,
                                     "sim_outcome": sim.SIM_OUTCOME_ANNOTATION,
                                     "sim_profile": sim.SIM_PROFILE_ANNOTATION}
    assert (_SIM_OUTCOMES, _SIM_PROFILES) == (sim.SIM_OUTCOMES, sim.SIM_PROFILES)
