"""``make demo`` run again on the same database does what its variables say.

The demo is ``seed_demo`` then the job stream ``demo_jobs``; this runs that pair
three times on one database: Kueue, Kueue again (the stream continues, nothing is
refused as a duplicate, the first run's live jobs are closed since the simulated
cluster starts empty), then ``SCHEDULER_BACKEND=volcano`` (the cluster switches,
as staff would switch it, and team weights follow Volcano's whole numbers).
"""

import io
import re

import pytest
from django.core.management import call_command

from portal.models import AuditEvent, Cluster, Job, Team

pytestmark = pytest.mark.django_db


def _demo_run(settings, backend: str) -> tuple[str, str]:
    settings.DEBUG = True   # seed_demo refuses to run without it (public demo passwords)
    settings.SCHEDULER_BACKEND = backend
    seeded, streamed, errors = io.StringIO(), io.StringIO(), io.StringIO()
    call_command("seed_demo", stdout=seeded)
    if backend == "kueue":
        call_command("demo_jobs", "--count", "9", "--every", "0", stdout=streamed,
                     stderr=errors)
        assert errors.getvalue() == ""   # no submission refused (e.g. as a duplicate name)
    return seeded.getvalue(), streamed.getvalue()


def _numbers() -> list[int]:
    return sorted(int(re.search(r"-(\d+)$", n).group(1))
                  for n in Job.objects.values_list("name", flat=True))


def test_rerun_continues_the_stream_then_switches_the_backend(settings):
    first, _ = _demo_run(settings, "kueue")
    assert "Rerun:" not in first
    assert _numbers() == list(range(1, 10))          # the first wave (8) and one more
    Job.objects.filter(name="train-0001").update(phase="Running")
    Job.objects.filter(name="train-0002").update(phase="Succeeded")

    second, streamed = _demo_run(settings, "kueue")
    assert "continuing after job number 0009" in streamed
    assert _numbers() == list(range(1, 19))          # 0010..0018: no name reused
    assert "Rerun: kept the database of an earlier run (9 jobs" in second
    assert "closed 8 jobs the earlier run left live (reason DemoRestarted)" in second
    closed = Job.objects.get(name="train-0001")
    assert (closed.phase, closed.reason) == ("Failed", "DemoRestarted")
    assert closed.deleted_at is not None and closed.finished_at is not None
    assert Job.objects.get(name="train-0002").phase == "Succeeded"   # final jobs untouched
    assert Cluster.objects.get(name="demo").backend == "kueue"
    assert "make clean" in second

    third, _ = _demo_run(settings, "volcano")
    cluster = Cluster.objects.get(name="demo")
    assert cluster.backend == "volcano"
    assert "Rerun: switched cluster demo from kueue to volcano" in third
    assert AuditEvent.objects.filter(action="cluster.backend_changed").count() == 1
    assert str(Team.objects.get(slug="speech").weight) in ("1", "1.00", "1.000")
    assert Job.objects.count() == 18                 # past jobs kept
