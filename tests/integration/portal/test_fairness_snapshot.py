"""Fairness snapshots: stored per flavor and interval, idempotent, pruned, run by a real worker."""

from datetime import UTC, datetime, timedelta

import pytest

from portal.celery import app
from portal.models import FairnessSnapshot
from portal.services.fairness import fairness_snapshot_take, snapshot_time
from portal.tasks import fairness_snapshot
from tests.integration.portal.fairness_world import build_fairness_world

NOON = datetime(2025, 3, 1, 12, 7, 31, tzinfo=UTC)


def test_snapshot_is_scheduled_by_beat(settings):
    entry = app.conf.beat_schedule["fairness-snapshot"]
    assert entry["task"] == "portal.fairness_snapshot"
    assert entry["schedule"] == settings.FAIRNESS_SNAPSHOT_INTERVAL_SECONDS == 300
    assert settings.FAIRNESS_SNAPSHOT_RETENTION_DAYS == 30


def test_snapshot_time_rounds_down_to_the_interval():
    assert snapshot_time(NOON, 300) == datetime(2025, 3, 1, 12, 5, tzinfo=UTC)
    assert snapshot_time(NOON, 3600) == datetime(2025, 3, 1, 12, 0, tzinfo=UTC)


@pytest.mark.django_db
def test_one_row_per_flavor_per_interval_and_old_rows_pruned():
    fw = build_fairness_world()
    assert fairness_snapshot_take(now=NOON) == {"created": 2, "pruned": 0}
    a100 = FairnessSnapshot.objects.get(flavor=fw["a100"])
    assert a100.taken_at == datetime(2025, 3, 1, 12, 5, tzinfo=UTC)
    assert a100.cluster == fw["cluster"]
    assert a100.capacity_gpus == 12
    assert a100.jain_index == pytest.approx(121 / 195)
    assert a100.teams_with_demand == 3
    assert [(t["slug"], t["usage_gpus"], t["fair_share_gpus"], t["dominant_resource"])
            for t in a100.teams] == [("team-a", 7, 4.0, "memory"), ("team-b", 4, 4.0, "cpu"),
                                     ("team-c", 0, 4.0, None)]
    t4 = FairnessSnapshot.objects.get(flavor=fw["t4"])
    assert (t4.capacity_gpus, t4.jain_index, t4.teams[0]["usage_gpus"]) == (2, 1.0, 0.5)

    # the same interval again: nothing new (a redelivered task is harmless)
    assert fairness_snapshot_take(now=NOON + timedelta(minutes=2)) == {"created": 0, "pruned": 0}
    # the next interval: two more
    later = NOON + timedelta(minutes=5)
    assert fairness_snapshot_take(now=later) == {"created": 2, "pruned": 0}
    # 30 days on, the first two are older than the retention and go
    month = NOON + timedelta(days=30, minutes=1)
    assert fairness_snapshot_take(now=month) == {"created": 2, "pruned": 2}
    assert FairnessSnapshot.objects.count() == 4
    first = datetime(2025, 3, 1, 12, 5, tzinfo=UTC)
    assert not FairnessSnapshot.objects.filter(taken_at=first).exists()


@pytest.mark.django_db(transaction=True)
def test_snapshot_task_runs_on_the_worker(celery_worker_process):
    build_fairness_world()
    result = fairness_snapshot.delay().get(timeout=30)
    assert result == {"created": 2, "pruned": 0}
    assert sorted(FairnessSnapshot.objects.values_list("flavor__name", "jain_index")) == [
        ("a100", pytest.approx(121 / 195)), ("t4-shared", 1.0)]
    # Again: nothing new within the interval (2 more only if it just crossed a boundary).
    again = fairness_snapshot.delay().get(timeout=30)
    assert again["created"] in (0, 2)
    assert FairnessSnapshot.objects.count() == 2 + again["created"]
