"""queues.metrics without a network: exposition parsing, attribution, units, coverage."""

import math

import pytest

from queues.metrics import (
    DCGM_METRICS,
    MIB,
    PodAllocation,
    QueryResult,
    Sample,
    activity_queries,
    job_name_from_pod,
    parse_exposition,
    samples_from_vector,
    utilization,
)

pytestmark = pytest.mark.unit


def series(metric, value, *, gpu="0", node="node-1", ns=None, pod=None, **extra):
    """One exposition line in dcgm-exporter's shape."""
    labels = {"gpu": gpu, "UUID": f"GPU-{node}-{gpu}", "Hostname": node,
              "modelName": "NVIDIA A100-SXM4-80GB"}
    if ns is not None:
        labels["namespace"] = ns
    if pod is not None:
        labels["pod"] = pod
    labels.update(extra)
    body = ",".join(f'{k}="{v}"' for k, v in labels.items())
    return f"{metric}{{{body}}} {value}"


def exposition(*lines):
    return "\n".join(lines) + "\n"


def test_alias_table_units():
    assert DCGM_METRICS["DCGM_FI_DEV_GPU_UTIL"].unit == "percent"
    assert DCGM_METRICS["DCGM_FI_DEV_GPU_UTIL"].scale == 0.01
    assert DCGM_METRICS["DCGM_FI_PROF_GR_ENGINE_ACTIVE"].unit == "ratio"
    assert DCGM_METRICS["DCGM_FI_DEV_FB_USED"].scale == MIB
    # GR_ENGINE_ACTIVE is preferred over GPU_UTIL when a GPU reports both
    assert (DCGM_METRICS["DCGM_FI_PROF_GR_ENGINE_ACTIVE"].priority
            < DCGM_METRICS["DCGM_FI_DEV_GPU_UTIL"].priority)


def test_parse_exposition_keeps_labels_nan_and_timestamps():
    text = (
        "# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).\n"
        "# TYPE DCGM_FI_DEV_GPU_UTIL gauge\n"
        'DCGM_FI_DEV_GPU_UTIL{gpu="0",pod="p"} 55\n'
        'DCGM_FI_DEV_GPU_UTIL{gpu="1"} NaN 1700000000000\n'
    )
    a, b = parse_exposition(text)
    assert a == Sample("DCGM_FI_DEV_GPU_UTIL", {"gpu": "0", "pod": "p"}, 55.0, None)
    assert math.isnan(b.value)
    assert b.timestamp == 1_700_000_000.0  # exposition timestamps are milliseconds


def test_parse_exposition_rejects_garbage():
    with pytest.raises(ValueError):  # noqa: PT011 - the parser's message is not ours
        parse_exposition("this is { not exposition\n")


def test_samples_from_vector_takes_name_from_caller_or_series():
    result = QueryResult("vector", [
        {"metric": {"gpu": "0", "namespace": "t"}, "value": [1700000000.5, "42"]},
    ])
    (s,) = samples_from_vector(result, metric="DCGM_FI_DEV_GPU_UTIL")
    assert s == Sample("DCGM_FI_DEV_GPU_UTIL", {"gpu": "0", "namespace": "t"}, 42.0, 1700000000.5)
    (s,) = samples_from_vector([{"metric": {"__name__": "x", "a": "b"}, "value": [1, "0.5"]}])
    assert (s.metric, s.labels) == ("x", {"a": "b"})
    with pytest.raises(ValueError, match="without a metric name"):
        samples_from_vector([{"metric": {}, "value": [1, "1"]}])
    with pytest.raises(ValueError, match="vector"):
        samples_from_vector(QueryResult("matrix", []))


def test_activity_queries_validate_window():
    queries = activity_queries("10m")
    assert queries["DCGM_FI_DEV_GPU_UTIL"] == "avg_over_time(DCGM_FI_DEV_GPU_UTIL[10m])"
    assert set(queries) == set(DCGM_METRICS)
    with pytest.raises(ValueError, match="duration"):
        activity_queries("5m]) or vector(1")


@pytest.mark.parametrize(
    ("pod", "job"),
    [
        ("train-x2kq9", "train"),  # Job pod: <job>-<random 5>
        ("train-3-x2kq9", "train"),  # Indexed Job pod: <job>-<index>-<random 5>
        ("llm-ft-worker-2", "llm-ft-worker"),  # Volcano: <job>-<task>-<index>
        ("standalone", "standalone"),
        ("train-abcde", "train-abcde"),  # vowels never occur in generated suffixes
    ],
)
def test_job_name_from_pod(pod, job):
    assert job_name_from_pod(pod) == job


def test_utilization_worked_example_per_team_and_job():
    # team-a, job "train": 2 pods x 1 GPU, activities 80 % and 0.6 -> busy 0.8 + 0.6 = 1.4,
    #   utilization 1.4 / 2 = 0.7.
    # team-a, job "eval": 1 GPU at 2 % -> idle (below 5 %).
    # team-a total: busy 1.4 + 0.02 = 1.42 over 3 GPUs.
    text = exposition(
        series("DCGM_FI_DEV_GPU_UTIL", 80, gpu="0", ns="team-a", pod="train-0-b7xzq"),
        series("DCGM_FI_PROF_GR_ENGINE_ACTIVE", 0.6, gpu="1", ns="team-a", pod="train-1-fghjk"),
        series("DCGM_FI_DEV_GPU_UTIL", 2, gpu="2", ns="team-a", pod="eval-lmnpq"),
        series("DCGM_FI_DEV_FB_USED", 1024, gpu="2", ns="team-a", pod="eval-lmnpq"),
    )
    report = utilization(
        parse_exposition(text),
        allocations=[PodAllocation("team-a", p, 1)
                     for p in ("train-0-b7xzq", "train-1-fghjk", "eval-lmnpq")],
    )
    jobs = {(r.team, r.job): r for r in report.jobs}
    train, ev = jobs[("team-a", "train")], jobs[("team-a", "eval")]
    assert train.pods == ("train-0-b7xzq", "train-1-fghjk")
    assert train.busy_gpu_equivalents == pytest.approx(1.4)
    assert train.utilization == pytest.approx(0.7)
    assert train.idle is False
    assert ev.utilization == pytest.approx(0.02)
    assert ev.idle is True
    assert ev.fb_used_bytes == 1024 * MIB
    (team,) = report.teams
    assert team.allocated_gpus == 3
    assert team.busy_gpu_equivalents == pytest.approx(1.42)
    assert team.coverage == "3 of 3 allocated GPUs reporting"
    assert report.dropped_total == 0
    assert report.unattributed is None


def test_missing_pod_labels_go_to_unattributed_never_to_team_empty():
    text = exposition(
        series("DCGM_FI_DEV_GPU_UTIL", 30, gpu="0"),  # no namespace, no pod
        series("DCGM_FI_DEV_GPU_UTIL", 50, gpu="1", ns="", pod=""),  # empty labels
        series("DCGM_FI_DEV_GPU_UTIL", 70, gpu="2", ns="team-a"),  # namespace but no pod
        series("DCGM_FI_DEV_GPU_UTIL", 10, gpu="3", ns="team-a", pod="p-b7xzq"),
    )
    report = utilization(parse_exposition(text))
    assert [r.team for r in report.teams] == ["team-a"]
    assert all(r.team for r in report.teams + report.jobs)
    un = report.unattributed
    assert un.team is None
    assert un.reporting_gpus == 3
    assert un.busy_gpu_equivalents == pytest.approx(0.3 + 0.5 + 0.7)
    assert un.coverage == "3 GPUs reporting"


def test_impossible_values_are_dropped_and_counted():
    text = exposition(
        series("DCGM_FI_DEV_GPU_UTIL", 150, gpu="0", ns="t", pod="a-b7xzq"),  # > 100 %
        series("DCGM_FI_DEV_GPU_UTIL", -1, gpu="1", ns="t", pod="a-b7xzq"),  # negative
        series("DCGM_FI_DEV_GPU_UTIL", "NaN", gpu="2", ns="t", pod="a-b7xzq"),
        series("DCGM_FI_PROF_GR_ENGINE_ACTIVE", 1.5, gpu="3", ns="t", pod="a-b7xzq"),  # ratio > 1
        series("DCGM_FI_DEV_FB_USED", -5, gpu="3", ns="t", pod="a-b7xzq"),
        series("DCGM_FI_DEV_GPU_UTIL", "+Inf", gpu="4", ns="t", pod="a-b7xzq"),
        series("DCGM_FI_DEV_GPU_UTIL", 100, gpu="5", ns="t", pod="a-b7xzq"),  # bound: valid
        series("DCGM_FI_DEV_GPU_TEMP", 300, gpu="5", ns="t", pod="a-b7xzq"),  # not ours
    )
    report = utilization(parse_exposition(text),
                         allocations=[PodAllocation("t", "a-b7xzq", 6)])
    assert report.dropped == {
        "DCGM_FI_DEV_GPU_UTIL": 4,
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE": 1,
        "DCGM_FI_DEV_FB_USED": 1,
    }
    assert report.dropped_total == 6
    assert report.ignored_samples == 1
    (row,) = report.teams
    # only gpu 5 reports (at 100 %): 1 of 6 GPUs
    assert row.coverage == "1 of 6 allocated GPUs reporting"
    assert row.utilization == 1.0
    assert row.fb_used_bytes is None


def test_no_data_is_none_not_zero_percent():
    text = exposition(series("DCGM_FI_DEV_GPU_UTIL", 0, gpu="0", ns="t", pod="busy-b7xzq"))
    report = utilization(
        parse_exposition(text),
        allocations=[PodAllocation("t", "busy-b7xzq", 1), PodAllocation("t", "silent-fghjk", 2)],
    )
    jobs = {r.job: r for r in report.jobs}
    # a real 0 % sample: utilization 0.0, idle
    assert jobs["busy"].utilization == 0.0
    assert jobs["busy"].busy_gpu_equivalents == 0.0
    assert jobs["busy"].idle is True
    # allocated but no series at all: no data
    assert jobs["silent"].utilization is None
    assert jobs["silent"].busy_gpu_equivalents is None
    assert jobs["silent"].idle is None
    assert jobs["silent"].coverage == "0 of 2 allocated GPUs reporting"
    (team,) = report.teams
    assert team.coverage == "1 of 3 allocated GPUs reporting"
    assert team.utilization == 0.0  # over the one reporting GPU only


def test_mig_instances_are_units_with_ratio_metric():
    # One A100 split into MIG instances; GR_ENGINE_ACTIVE is a ratio per instance.
    # Pod x holds instances 1 and 2 (0.5 + 0.25 = 0.75 busy over 2 -> 0.375);
    # pod y holds instance 3 at 0.9. Same physical gpu "0" and UUID for all of them.
    def mig(value, gi, pod):
        return series("DCGM_FI_PROF_GR_ENGINE_ACTIVE", value, gpu="0", ns="team-m", pod=pod,
                      GPU_I_PROFILE="1g.10gb", GPU_I_ID=gi)

    text = exposition(mig(0.5, "1", "x-b7xzq"), mig(0.25, "2", "x-b7xzq"), mig(0.9, "3", "y-fghjk"))
    report = utilization(
        parse_exposition(text),
        allocations=[PodAllocation("team-m", "x-b7xzq", 2, flavor="a100-1g.10gb"),
                     PodAllocation("team-m", "y-fghjk", 1, flavor="a100-1g.10gb")],
    )
    jobs = {r.job: r for r in report.jobs}
    assert jobs["x"].reporting_gpus == 2
    assert jobs["x"].utilization == pytest.approx(0.375)
    assert jobs["y"].utilization == pytest.approx(0.9)
    (team,) = report.teams
    assert team.busy_gpu_equivalents == pytest.approx(1.65)
    assert team.coverage == "3 of 3 allocated GPUs reporting"


def test_mixed_metric_names_one_gpu_counted_once():
    # node-1 has only the default counters (percent), node-2 only DCP (ratio), node-3 both
    # for the same GPU (GR_ENGINE_ACTIVE wins: 0.3, not 0.9 and not their sum), and a
    # 1.x-named exporter on node-4.
    text = exposition(
        series("DCGM_FI_DEV_GPU_UTIL", 40, node="node-1", ns="t", pod="j-b7xzq"),
        series("DCGM_FI_PROF_GR_ENGINE_ACTIVE", 0.2, node="node-2", ns="t", pod="j-b7xzq"),
        series("DCGM_FI_DEV_GPU_UTIL", 90, node="node-3", ns="t", pod="j-b7xzq"),
        series("DCGM_FI_PROF_GR_ENGINE_ACTIVE", 0.3, node="node-3", ns="t", pod="j-b7xzq"),
        series("dcgm_gpu_utilization", 50, node="node-4", ns="t", pod="j-b7xzq",
               pod_namespace="ignored"),
    )
    report = utilization(parse_exposition(text), allocations=[PodAllocation("t", "j-b7xzq", 4)])
    (row,) = report.teams
    # 0.4 + 0.2 + 0.3 + 0.5 = 1.4 busy over 4 GPUs
    assert row.busy_gpu_equivalents == pytest.approx(1.4)
    assert row.reporting_gpus == 4
    assert row.utilization == pytest.approx(0.35)


def test_old_and_exported_label_names_attribute_to_the_pod():
    text = exposition(
        # --use-old-namespace
        'DCGM_FI_DEV_GPU_UTIL{gpu="0",Hostname="n",pod_namespace="old",pod_name="o-b7xzq"} 10',
        # Prometheus renamed the exporter's labels; "namespace" is the exporter's own
        'DCGM_FI_DEV_GPU_UTIL{gpu="1",Hostname="n",namespace="gpu-operator",'
        'pod="dcgm-exporter-x",exported_namespace="team-x",exported_pod="e-fghjk"} 20',
    )
    report = utilization(parse_exposition(text))
    assert {(r.team, r.job) for r in report.jobs} == {("old", "o"), ("team-x", "e")}


def test_time_sliced_gpu_counts_physical_gpus():
    # One physical T4 shared 4 ways (replicas=4); dcgm-exporter repeats the GPU's 60 %
    # for each of the two pods on it. Each pod holds 1 replica = 1/4 GPU and gets
    # 0.6 / 4 = 0.15 busy; both together: 0.3 busy GPU-equivalents on 0.5 GPU allocated.
    text = exposition(
        series("DCGM_FI_DEV_GPU_UTIL", 60, ns="t", pod="a-b7xzq", modelName="Tesla T4"),
        series("DCGM_FI_DEV_GPU_UTIL", 60, ns="t", pod="b-fghjk", modelName="Tesla T4"),
        series("DCGM_FI_DEV_FB_USED", 4096, ns="t", pod="a-b7xzq", modelName="Tesla T4"),
    )
    report = utilization(
        parse_exposition(text),
        allocations=[PodAllocation("t", "a-b7xzq", 1, flavor="t4-shared"),
                     PodAllocation("t", "b-fghjk", 1, flavor="t4-shared")],
        replicas_per_gpu={"t4-shared": 4},
    )
    (team,) = report.teams
    assert team.allocated_gpus == 0.5
    assert team.reporting_gpus == 0.5
    assert team.busy_gpu_equivalents == pytest.approx(0.3)
    assert team.utilization == pytest.approx(0.6)
    assert team.coverage == "0.5 of 0.5 allocated GPUs reporting"
    assert team.fb_used_bytes == 1024 * MIB  # 4096 MiB split over 4 replicas
    # without an allocation, the modelName label finds the replicas
    by_model = utilization(parse_exposition(text), replicas_per_gpu={"Tesla T4": 4})
    assert by_model.teams[0].busy_gpu_equivalents == pytest.approx(0.3)


def test_caller_mapping_names_the_job_and_unallocated_pods_are_listed():
    text = exposition(
        series("DCGM_FI_DEV_GPU_UTIL", 50, gpu="0", ns="t", pod="ft-launcher-b7xzq"),
        series("DCGM_FI_DEV_GPU_UTIL", 50, gpu="1", ns="t", pod="ft-worker-0"),
        series("DCGM_FI_DEV_GPU_UTIL", 50, gpu="2", ns="t", pod="stray-fghjk"),
    )
    report = utilization(
        parse_exposition(text),
        allocations=[PodAllocation("t", "ft-launcher-b7xzq", 1),
                     PodAllocation("t", "ft-worker-0", 1)],
        pod_jobs={("t", "ft-launcher-b7xzq"): "finetune", ("t", "ft-worker-0"): "finetune"},
    )
    jobs = {r.job: r for r in report.jobs}
    assert jobs["finetune"].pods == ("ft-launcher-b7xzq", "ft-worker-0")
    assert jobs["finetune"].busy_gpu_equivalents == pytest.approx(1.0)
    assert jobs["stray"].allocated_gpus == 0
    assert report.unallocated_pods == (("t", "stray-fghjk"),)


def test_more_reporting_gpus_than_allocated_is_capped():
    text = exposition(
        series("DCGM_FI_DEV_GPU_UTIL", 100, gpu="0", ns="t", pod="p-b7xzq"),
        series("DCGM_FI_DEV_GPU_UTIL", 50, gpu="1", ns="t", pod="p-b7xzq"),
    )
    report = utilization(parse_exposition(text), allocations=[PodAllocation("t", "p-b7xzq", 1)])
    (row,) = report.teams
    assert row.reporting_gpus == 1
    assert row.busy_gpu_equivalents == pytest.approx(0.75)  # mean activity kept
    assert row.coverage == "1 of 1 allocated GPUs reporting"


def test_duplicate_series_are_averaged_not_added():
    # the same GPU scraped twice (two Prometheus jobs, same labels we key on)
    samples = [
        Sample("DCGM_FI_DEV_GPU_UTIL", {"gpu": "0", "Hostname": "n", "namespace": "t",
                                        "pod": "p-b7xzq", "job": "a"}, 40.0),
        Sample("DCGM_FI_DEV_GPU_UTIL", {"gpu": "0", "Hostname": "n", "namespace": "t",
                                        "pod": "p-b7xzq", "job": "b"}, 60.0),
    ]
    (row,) = utilization(samples).teams
    assert row.busy_gpu_equivalents == pytest.approx(0.5)
    assert row.reporting_gpus == 1


def test_invalid_arguments():
    with pytest.raises(ValueError, match="idle_below"):
        utilization([], idle_below=5)
    with pytest.raises(ValueError, match="replicas"):
        utilization([], replicas_per_gpu={"x": 0})
    with pytest.raises(ValueError, match="negative"):
        utilization([], allocations=[PodAllocation("t", "p", -1)])
    empty = utilization([])
    assert (empty.teams, empty.jobs, empty.unattributed) == ((), (), None)
