"""harness.traces: both trace readers (inline samples and the real files in ../shared/traces),
gang shapes, quota sizing by GPU-hours, outcomes, --since parsing."""

from collections import Counter
from datetime import datetime

import pytest

from harness import traces
from harness.traces import (
    TraceError,
    TraceJob,
    TraceStats,
    draw_outcome,
    gang_shape,
    gpu_hours_by_vc,
    nominal_quotas,
    parse_since,
    read_elasticflow,
    read_philly,
    read_trace,
)
from tests.services import shared_path

PHILLY_HEADER = "timestamp,duration,num_gpus,gpu_time,cluster\n"


def write(path, text: str):
    path.write_text(text)
    return path


# --- Philly, inline -------------------------------------------------------------------


@pytest.fixture
def philly_sample(tmp_path):
    """Unsorted rows, an exact duplicate, one bad row per field, a blank last line."""
    return write(tmp_path / "philly.csv", PHILLY_HEADER + "\n".join([
        "2017-10-09 07:01:55,66.0,1,66.0,11cb48",       # row 1
        "2017-10-09 06:13:03,2951.0,1,2951.0,6214e9",   # row 2 (earliest)
        "2017-10-09 07:01:55,66.0,1,66.0,11cb48",       # row 3: exact duplicate of row 1
        "2017-10-09 07:01:55,120.0,16,1920.0,ee9e8c",   # row 4: same time as row 1
        "2017-10-09 08:00:00,10.0,0,0.0,11cb48",        # row 5: 0 GPUs
        "2017-10-09 08:00:00,abc,1,1.0,11cb48",         # row 6: duration not a number
        "2017-10-09 08:00:00,-5.0,1,-5.0,11cb48",       # row 7: duration not > 0
        "09/10/2017 08:00,10.0,1,10.0,11cb48",          # row 8: timestamp format
        "2017-10-09 08:00:00,10.0,2,30.0,11cb48",       # row 9: gpu_time != duration x gpus
        "2017-10-09 08:00:00,10.0,1.5,15.0,11cb48",     # row 10: GPUs not whole
        "2017-10-09 08:00:00,10.0,1,10.0,VC_1",         # row 11: cluster not a label part
        "2017-10-09 08:00:00,10.0,1",                   # row 12: short row
        "2017-10-10 06:13:03,7.0,12,84.0,6c71a0",       # row 13: a day after row 2
    ]) + "\n\n")


def test_philly_sorted_deduplicated_and_skips_counted_per_field(philly_sample):
    stats = TraceStats()
    jobs = list(read_philly(philly_sample, stats=stats))
    assert [(j.job_id, j.vc, j.submit_time, j.gpus, j.duration_seconds) for j in jobs] == [
        ("2", "6214e9", 0.0, 1, 2951.0),
        ("1", "11cb48", 2932.0, 1, 66.0),      # 07:01:55 - 06:13:03 = 48 min 52 s
        ("4", "ee9e8c", 2932.0, 16, 120.0),    # a tie keeps file order
        ("13", "6c71a0", 86400.0, 12, 7.0),
    ]
    assert stats.rows == 13
    assert stats.duplicates == 1
    assert stats.skipped == Counter({
        "num_gpus: 0 GPUs": 1,
        "duration: not a number": 1,
        "duration: not > 0": 1,
        "timestamp: not YYYY-MM-DD HH:MM:SS": 1,
        "gpu_time: not duration x num_gpus": 1,
        "num_gpus: not a whole number": 1,
        "cluster: not lowercase letters, digits and '-'": 1,
        "row: fewer than 5 columns": 1,
    })
    assert stats.skipped_total == 8
    assert stats.yielded == 4
    assert stats.trace_start == datetime(2017, 10, 9, 6, 13, 3)
    assert all(j.outcome in ("completed", "cancelled", "failed") for j in jobs)


def test_philly_since_seconds_timestamp_and_limit(philly_sample):
    stats = TraceStats()
    jobs = list(read_philly(philly_sample, since=2932.0, limit=2, stats=stats))
    assert [j.job_id for j in jobs] == ["1", "4"]
    assert stats.before_since == 1 and stats.yielded == 2
    by_stamp = list(read_philly(philly_sample, since=datetime(2017, 10, 9, 7, 1, 56)))
    assert [j.job_id for j in by_stamp] == ["13"]
    assert list(read_philly(philly_sample, limit=0)) == []


def test_philly_pacific_clock_counts_the_dst_hour(tmp_path):
    """2017-11-05 is the end of US daylight time: 03:00 on the 4th to 03:00 on the 5th is 25 h."""
    path = write(tmp_path / "philly.csv", PHILLY_HEADER
                 + "2017-11-04 03:00:00,1.0,1,1.0,aaaaaa\n2017-11-05 03:00:00,1.0,1,1.0,aaaaaa\n")
    assert [j.submit_time for j in read_philly(path)] == [0.0, 25 * 3600.0]


def test_philly_file_errors_name_the_file_or_column(tmp_path):
    with pytest.raises(TraceError) as missing:
        list(read_philly(tmp_path / "nope.csv"))
    assert missing.value.field.endswith("nope.csv")
    bad = write(tmp_path / "bad.csv", "timestamp,duration,num_gpus,cluster\n")
    with pytest.raises(TraceError, match="header lacks column.s. gpu_time"):
        list(read_philly(bad))


# --- Philly, the real file --------------------------------------------------------------


@pytest.fixture(scope="module")
def philly_path():
    return shared_path("traces", "philly-pollux", "philly.csv")


@pytest.mark.parametrize(("first_rows", "duplicates", "jobs", "gpus", "vcs"), [
    (2000, 0, 2000, {1: 1901, 2: 49, 4: 20, 8: 30}, 11),
    (5000, 3, 4997, {1: 4818, 2: 82, 4: 43, 8: 49, 16: 1, 32: 4}, 11),
])
def test_philly_real_first_rows(philly_path, tmp_path, first_rows, duplicates, jobs, gpus, vcs):
    """The first N data rows of the real file (copied to a temp file: exact duplicates at
    data rows 3136, 3289 and 4989 repeat rows 3135, 3279 and 4988)."""
    lines = philly_path.read_text().splitlines(keepends=True)
    sample = write(tmp_path / "philly.csv", "".join(lines[: first_rows + 1]))
    stats = TraceStats()
    out = list(read_philly(sample, stats=stats))
    assert (stats.rows, stats.duplicates, stats.skipped_total, len(out)) == (
        first_rows, duplicates, 0, jobs)
    assert dict(Counter(j.gpus for j in out)) == gpus
    assert len({j.vc for j in out}) == vcs
    assert stats.trace_start == datetime(2017, 9, 7, 9, 57, 50)
    assert (out[0].job_id, out[-1].submit_time) == ("1985", 2754245.0)
    assert [j.submit_time for j in out] == sorted(j.submit_time for j in out)


def test_philly_real_whole_file(philly_path):
    stats = TraceStats()
    jobs = list(read_philly(philly_path, stats=stats))
    assert (stats.rows, stats.duplicates, stats.skipped_total, len(jobs)) == (
        82247, 65, 0, 82182)
    assert stats.trace_start == datetime(2017, 9, 4, 10, 30, 41)
    assert jobs[0] == TraceJob(job_id="31567", vc="7f04ca", submit_time=0.0, gpus=8,
                               duration_seconds=2240194.0, outcome="completed")
    assert dict(sorted(Counter(j.gpus for j in jobs).items())) == {
        1: 76565, 2: 1816, 4: 1869, 8: 1643, 12: 7, 16: 199, 24: 7, 32: 67, 64: 6, 128: 3}
    hours = gpu_hours_by_vc(jobs)
    assert len(hours) == 15
    # The trace README's table (GPU-hours per VC, rounded): the duplicates barely move it.
    assert round(hours["ee9e8c"]) == 256112 and round(hours["6214e9"]) == 97182
    assert Counter(j.outcome for j in jobs) == Counter(
        completed=49746, failed=25086, cancelled=7350)


def test_philly_real_since_timestamp_and_limit(philly_path):
    stats = TraceStats()
    jobs = list(read_philly(philly_path, since=parse_since("2017-10-09 07:01:55"), limit=3,
                            stats=stats))
    assert [(j.job_id, j.submit_time) for j in jobs] == [
        ("1", 3011474.0), ("76471", 3011718.0), ("76466", 3011909.0)]
    assert stats.before_since == 18383


# --- ElasticFlow, inline --------------------------------------------------------------------


EF_HEADER = "job_id,submission_time,duration,num_gpu\n"


def test_elasticflow_folder_merged_on_submission_time(tmp_path):
    write(tmp_path / "cluster01.csv", EF_HEADER + "\n".join([
        "aaaa-1,10,100,8",
        "aaaa-2,30,50,64",
        "aaaa-2,30,50,64",      # exact duplicate
        "aaaa-3,40,50,0",       # 0 GPUs
    ]))  # no final newline, like the real files
    write(tmp_path / "cluster02.csv", EF_HEADER + "\n".join([
        "bbbb-1,5,20,1",
        "bbbb-2,10,20,2",        # ties cluster01's first job: file order
        "BAD ID,20,20,1",
        "bbbb-3,x,20,1",
        "bbbb-4,25,0,1",
    ]) + "\n")
    write(tmp_path / "notes.txt", "ignored")
    stats = TraceStats()
    jobs = list(read_elasticflow(tmp_path, stats=stats))
    assert [(j.job_id, j.vc, j.submit_time, j.gpus) for j in jobs] == [
        ("bbbb-1", "cluster02", 5.0, 1),
        ("aaaa-1", "cluster01", 10.0, 8),
        ("bbbb-2", "cluster02", 10.0, 2),
        ("aaaa-2", "cluster01", 30.0, 64),
    ]
    assert stats.rows == 9 and stats.duplicates == 1
    assert stats.skipped == Counter({
        "num_gpu: 0 GPUs": 1, "job_id: not lowercase letters, digits and '-'": 1,
        "submission_time: not a number": 1, "duration: not > 0": 1})
    assert [j.job_id for j in read_elasticflow(tmp_path / "cluster01.csv", since=20)] == [
        "aaaa-2"]


def test_elasticflow_refuses_unsorted_rows_and_timestamps(tmp_path):
    path = write(tmp_path / "cluster03.csv", EF_HEADER + "x-1,50,1,1\nx-2,40,1,1\n")
    with pytest.raises(TraceError, match="not sorted") as error:
        list(read_elasticflow(path))
    assert error.value.field.endswith("cluster03.csv:3")
    with pytest.raises(TraceError) as since:
        list(read_elasticflow(path, since=datetime(2021, 3, 4)))
    assert since.value.field == "since"
    (tmp_path / "empty").mkdir()
    with pytest.raises(TraceError, match="no .csv files"):
        list(read_elasticflow(tmp_path / "empty"))


# --- ElasticFlow, the real files ------------------------------------------------------


@pytest.fixture(scope="module")
def elasticflow_dir():
    return shared_path("traces", "elasticflow-itp")


def test_elasticflow_real_folder(elasticflow_dir):
    stats = TraceStats()
    jobs = list(read_elasticflow(elasticflow_dir, stats=stats))
    assert (stats.rows, stats.duplicates, stats.skipped_total, len(jobs)) == (
        69351, 0, 0, 69351)
    assert dict(sorted(Counter(j.gpus for j in jobs).items())) == {
        1: 57682, 2: 1483, 4: 2371, 8: 7009, 16: 381, 32: 354, 64: 71}
    assert Counter(j.vc for j in jobs)["cluster04"] == 15802
    assert (jobs[0].job_id, jobs[0].vc, jobs[0].submit_time) == (
        "a11b4fc9-8f06-7093-2b93-bcb89acf0e7e", "cluster07", 1999.0)
    assert jobs[-1].submit_time == 5175336.0
    assert [j.submit_time for j in jobs] == sorted(j.submit_time for j in jobs)


def test_elasticflow_real_limit_streams(elasticflow_dir):
    """With a limit the merge stops early: 10 jobs need 19 rows (one head row per file)."""
    stats = TraceStats()
    jobs = list(read_trace(elasticflow_dir, "elasticflow", limit=10, stats=stats))
    assert len(jobs) == 10 and {j.vc for j in jobs} == {"cluster07"}
    assert stats.rows == 19


def test_elasticflow_real_single_file(elasticflow_dir):
    jobs = list(read_elasticflow(elasticflow_dir / "cluster10.csv"))
    assert len(jobs) == 260 and {j.vc for j in jobs} == {"cluster10"}


def test_read_trace_unknown_format(tmp_path):
    with pytest.raises(TraceError) as error:
        read_trace(tmp_path, "alibaba")
    assert error.value.field == "format"


# --- gang shape -----------------------------------------------------------------------


@pytest.mark.parametrize(("gpus", "per_node", "shape"), [
    (1, 8, (1, 1)), (2, 8, (1, 2)), (4, 8, (1, 4)), (8, 8, (1, 8)),
    (12, 8, (2, 6)),     # not a multiple of 8: spread evenly, 12 GPUs exactly (not 2 x 8)
    (13, 8, (2, 7)),     # uneven: per-worker rounds up, 14 GPUs (1 extra)
    (16, 8, (2, 8)), (24, 8, (3, 8)), (64, 8, (8, 8)), (128, 8, (16, 8)),
    (8, 4, (2, 4)), (6, 4, (2, 3)), (3, 1, (3, 1)),
])
def test_gang_shape(gpus, per_node, shape):
    assert gang_shape(gpus, per_node) == shape
    workers, per_worker = shape
    assert per_worker <= per_node and workers * per_worker >= gpus
    assert workers * per_worker - gpus < workers


@pytest.mark.parametrize(("gpus", "per_node", "field"), [
    (0, 8, "gpus"), (-1, 8, "gpus"), (True, 8, "gpus"), (2.0, 8, "gpus"),
    (8, 0, "gpus_per_node"),
])
def test_gang_shape_refuses(gpus, per_node, field):
    with pytest.raises(ValueError, match=f"^{field} must be a whole number >= 1"):
        gang_shape(gpus, per_node)


def test_trace_job_gang_and_gpu_hours():
    job = TraceJob(job_id="7", vc="a", submit_time=0.0, gpus=24, duration_seconds=1800.0,
                   outcome="completed")
    assert job.gang() == (3, 8) and job.gpu_hours == 12.0


# --- quota sizing ---------------------------------------------------------------------


def test_nominal_quotas_largest_remainder():
    # Exact shares 3.5, 2.1, 1.4 -> floors 3, 2, 1 (6); the 7th GPU goes to the largest
    # remainder (a: .5).
    assert nominal_quotas({"a": 10.0, "b": 6.0, "c": 4.0}, 7) == {"a": 4, "b": 2, "c": 1}
    # Shares 33.33.., 33.33.., 33.33..: one GPU left, a tie on remainder and hours -> name.
    assert nominal_quotas({"y": 1.0, "x": 1.0, "z": 1.0}, 100) == {"y": 33, "x": 34, "z": 33}
    # Hours 1 and 3 of capacity 2: shares 0.5 and 1.5, floors 0 + 1, one GPU left and a
    # tie on the remainder (.5/.5): it goes to the VC with more GPU-hours (b).
    assert nominal_quotas({"a": 1.0, "b": 3.0}, 2) == {"a": 0, "b": 2}
    assert nominal_quotas({"a": 5.0, "tiny": 0.001}, 10) == {"a": 10, "tiny": 0}
    assert nominal_quotas({"a": 0.0}, 0) == {"a": 0}


@pytest.mark.parametrize(("hours", "capacity", "message"), [
    ({"a": -1.0}, 4, "GPU-hours of 'a'"), ({"a": float("nan")}, 4, "GPU-hours of 'a'"),
    ({"a": 0.0}, 4, "no GPU-hours"), ({"a": 1.0}, -1, "capacity"), ({"a": 1.0}, 2.5, "capacity"),
])
def test_nominal_quotas_refuses(hours, capacity, message):
    with pytest.raises(ValueError, match=message):
        nominal_quotas(hours, capacity)


def test_nominal_quotas_on_the_philly_trace(philly_path):
    """The 15 Philly VCs sharing Philly's 2,490 GPUs by their GPU-hours."""
    hours = gpu_hours_by_vc(read_philly(philly_path))
    quotas = nominal_quotas(hours, 2490)
    assert sum(quotas.values()) == 2490
    assert quotas == {
        "7f04ca": 420, "6214e9": 247, "b436b2": 320, "ed69ec": 23, "e13805": 35,
        "ee9e8c": 652, "103959": 109, "6c71a0": 209, "11cb48": 72, "2869ce": 205,
        "23dbec": 0, "0e4a51": 198, "795a4c": 0, "51b7ef": 0, "925e2b": 0}
    total = sum(hours.values())
    for vc, gpus in quotas.items():
        assert abs(gpus - 2490 * hours[vc] / total) < 1


# --- outcomes and --since -------------------------------------------------------------


def test_draw_outcome_is_deterministic_and_follows_the_mix():
    assert draw_outcome("philly", "1") == draw_outcome("philly", "1")
    drawn = Counter(draw_outcome("philly", str(i)) for i in range(20000))
    assert abs(drawn["completed"] / 20000 - 0.604 / 0.999) < 0.01
    assert abs(drawn["cancelled"] / 20000 - 0.090 / 0.999) < 0.01
    assert abs(drawn["failed"] / 20000 - 0.305 / 0.999) < 0.01


@pytest.mark.parametrize(("value", "expected"), [
    (None, None), ("", None), ("3600", 3600.0), ("1.5e4", 15000.0), (0, 0.0),
    ("2017-10-09 07:01:55", datetime(2017, 10, 9, 7, 1, 55)),
    ("2017-10-09T07:01:55", datetime(2017, 10, 9, 7, 1, 55)),
])
def test_parse_since(value, expected):
    assert parse_since(value) == expected


@pytest.mark.parametrize("value", ["-1", "yesterday", "nan", "2017-10-09T07:01:55+00:00"])
def test_parse_since_refuses(value):
    with pytest.raises(TraceError) as error:
        parse_since(value)
    assert error.value.field == "since"


def test_formats():
    assert traces.FORMATS == ("philly", "elasticflow")
