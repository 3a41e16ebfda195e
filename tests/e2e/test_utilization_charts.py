"""The team and staff utilization pages draw their charts (SVG) and the CSV downloads."""

import csv
import io
from datetime import timedelta

import pytest
from django.utils import timezone

from portal.models import IdleFlag, Job
from portal.services.usage import STEP, floor_to, usage_collect
from queues.metrics import parse_exposition
from tests.dcgm import DCGM_TEXT
from tests.e2e.pages.auth import LoginPage
from tests.e2e.pages.quota import NavBar
from tests.e2e.pages.utilization import StaffUtilizationPage, TeamUtilizationPage
from tests.factories import PASSWORD, make_cluster, make_flavor, make_team, make_user


@pytest.mark.django_db(transaction=True)
def test_team_and_staff_charts_render_and_csv_downloads(live_server, page):
    cluster = make_cluster(name="gpu-east")
    h100 = make_flavor(cluster=cluster, name="h100")
    team_a = make_team(cluster=cluster, slug="team-a")
    owner = make_user("olga", team=team_a)
    make_user("sam", staff=True)
    for name, workers, gpus in (("train", 2, 2), ("eval", 1, 1)):
        Job.objects.create(team=team_a, flavor=h100, name=name, workers=workers,
                           gpus_per_worker=gpus, phase="Running", submitter=owner,
                           image="registry.example/train:1")
    now = floor_to(timezone.now(), STEP)
    for k in range(24):  # two hours of 5-minute samples
        usage_collect(at=now - timedelta(seconds=k * STEP), samples=parse_exposition(DCGM_TEXT))
    IdleFlag.objects.create(job=Job.objects.get(name="eval"), gpus=1, activity=0.0,
                            threshold=0.05, window_hours=24, idle_since=now - timedelta(days=1),
                            flagged_at=now, reclaimable_at=now - timedelta(minutes=1))

    LoginPage(page, live_server.url).open().log_in("olga", PASSWORD)
    team_page = TeamUtilizationPage(page).open(live_server.url, "team-a")
    team_page.wait_for_charts("team-alloc-busy", "team-showback")
    assert team_page.svg_count("team-alloc-busy") > 0
    assert team_page.svg_count("team-showback") > 0
    assert any("busy" in s for s in team_page.sentences("team-showback"))
    rows = list(csv.DictReader(io.StringIO(team_page.download_csv())))
    assert [r["team"] for r in rows] == ["team-a"]
    assert float(rows[0]["allocated_gpu_hours"]) == pytest.approx(24 * 5 / 12, abs=1e-5)
    assert float(rows[0]["efficiency"]) == pytest.approx(0.5)
    NavBar(page).log_out()

    LoginPage(page, live_server.url).open().log_in("sam", PASSWORD)
    staff_page = StaffUtilizationPage(page).open(live_server.url)
    staff_page.wait_for_charts("staff-heatmap")
    assert staff_page.svg_count("staff-heatmap") > 0
    assert staff_page.idle_jobs() == ["eval"]
    staff_page.reclaim("eval")
    page.wait_for_selector(".messages li")
    assert IdleFlag.objects.get().state == "reclaimed"
