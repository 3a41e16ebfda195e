"""``manage.py demo_jobs``: a steady stream of realistic gang jobs for the demo (``make demo``).

Submits through :func:`portal.services.jobs.job_submit` (the same checks, rows,
manifests and worker tasks as the API) as the team's members, or as staff for
teams without demo members. Each job declares how it behaves on the simulated
cluster (``sim_duration_seconds`` 20-120 s, ``sim_outcome``, ``sim_profile``):

* a first wave at once, chosen so that within a minute some jobs queue (two
  16-GPU gangs for search-ranking, whose whole reach is 16 H100), some run, and
  a few short ones (20-30 s) succeed;
* then one job every ``--every`` seconds (default 6, jittered): training gangs
  (1-4 workers x 2-8 GPUs, busy), notebooks (1 GPU or MIG slice, idling for
  their whole life), inference (bursty), 1 in 12 failing; priorities mostly
  ``standard``, some ``preemptible`` and ``production``;
* paused while more than ``--max-live`` jobs are not finished.

Deterministic for a given ``--seed``. Stops on SIGINT/SIGTERM.
"""

from __future__ import annotations

import random
import signal
import threading

from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.management.base import BaseCommand
from django.db import OperationalError

from portal.models import Job, QuotaGrant, Team
from portal.services.jobs import job_submit

#: (team, flavor, workers, GPUs per worker, seconds, profile, priority, outcome)
FIRST_WAVE = (
    ("search-ranking", "h100", 2, 8, 110, "training", "standard", "Succeeded"),
    ("search-ranking", "h100", 2, 8, 90, "training", "standard", "Succeeded"),
    ("vision", "a100", 1, 4, 20, "training", "standard", "Succeeded"),
    ("speech", "a100", 1, 2, 25, "inference", "production", "Succeeded"),
    ("nlp-research", "h100", 4, 4, 120, "training", "standard", "Succeeded"),
    ("notebooks", "a100-mig-1g", 1, 1, 100, "notebook", "preemptible", "Succeeded"),
    ("recsys", "a100", 1, 8, 30, "training", "standard", "Succeeded"),
    ("nlp-research", "a100-mig-1g", 1, 2, 60, "notebook", "standard", "Succeeded"),
)
#: Demo logins that submit for their team (others: staff).
SUBMITTERS = {"nlp-research": ("alice", "bob"), "vision": ("carol",)}


class Command(BaseCommand):
    """Submit demo jobs until interrupted."""

    help = "Submit a steady stream of demo jobs through the job service."

    def add_arguments(self, parser) -> None:
        """``--every`` seconds between jobs, ``--max-live``, ``--seed``, ``--count``."""
        parser.add_argument("--every", type=float, default=6.0)
        parser.add_argument("--max-live", type=int, default=40)
        parser.add_argument("--seed", type=int, default=7)
        parser.add_argument("--count", type=int, default=0, help="stop after N jobs (0: never)")

    def handle(self, *args, every: float, max_live: int, seed: int, count: int,
               **options) -> None:
        """The first wave, then one job per ``every`` seconds."""
        stop = threading.Event()
        signal.signal(signal.SIGINT, lambda *_: stop.set())
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        rng = random.Random(seed)  # noqa: S311 - demo data, not secrets
        users = {u.username: u for u in get_user_model().objects.all()}
        staff = next((u for u in users.values() if u.is_staff), None)
        teams = {t.slug: t for t in Team.objects.select_related("cluster")}
        grants = {}
        for grant in QuotaGrant.objects.select_related("flavor", "team"):
            grants.setdefault(grant.team.slug, []).append(grant)
        # A rerun continues the stream: names are unique among a team's jobs, so start
        # after the highest number an earlier run used (train-0041 -> the next is 0042).
        submitted = self.last_number()
        if submitted:
            self.stdout.write(f"demo_jobs: continuing after job number {submitted:04d} "
                              "of an earlier run")
        first = submitted

        def submit(team_slug, flavor, workers, gpus, seconds, profile, priority, outcome):
            nonlocal submitted
            team = teams.get(team_slug)
            if team is None:
                return
            names = SUBMITTERS.get(team_slug)
            actor = users.get(rng.choice(names)) if names else staff
            kind = {"training": "train", "notebook": "nb", "inference": "serve"}[profile]
            for _ in range(3):
                try:
                    job_submit(actor=actor, team=team, name=f"{kind}-{submitted + 1:04d}",
                               image="ghcr.io/acme/trainer:1.4",
                               command=["python", "-m", "trainer"], workers=workers,
                               gpus_per_worker=gpus, flavor=flavor, priority=priority,
                               kind="jobset" if workers > 2 else "job",
                               sim_duration_seconds=seconds, sim_outcome=outcome,
                               sim_profile=profile)
                    submitted += 1
                    return
                except (ValidationError, PermissionDenied) as exc:
                    self.stderr.write(f"demo_jobs: {team_slug}: {exc}")
                    submitted += 1
                    return
                except OperationalError:  # SQLite busy beyond its timeout: try again
                    stop.wait(1)

        for item in FIRST_WAVE:
            if stop.is_set():
                return
            submit(*item)
        while not stop.is_set() and (count == 0 or submitted - first < count):
            stop.wait(every * rng.uniform(0.5, 1.5))
            if stop.is_set():
                break
            live = Job.objects.exclude(phase__in=Job.FINAL_PHASES).count()
            if live > max_live:
                continue
            team_slug = rng.choice(sorted(grants))
            grant = rng.choice(grants[team_slug])
            submit(team_slug, grant.flavor.name, *self._shape(rng, grant))

    @staticmethod
    def last_number() -> int:
        """The highest N of the stream's job names (``train-N``, ``nb-N``, ``serve-N``)
        in the database; 0 when there are none."""
        numbers = [int(name.rsplit("-", 1)[1]) for name in Job.objects.filter(
            name__regex=r"^(train|nb|serve)-[0-9]{4,}$").values_list("name", flat=True)]
        return max(numbers, default=0)

    @staticmethod
    def _shape(rng: random.Random, grant) -> tuple:
        """``(workers, GPUs per worker, seconds, profile, priority, outcome)`` for a job
        that the grant can admit (at most its nominal quota, so it is never refused)."""
        cap = max(1, grant.nominal_gpus)
        mig = grant.flavor.gpu_resource.startswith("nvidia.com/mig-")
        roll = rng.random()
        if mig or roll < 0.25:
            profile, workers, gpus = "notebook", 1, rng.choice((1, 1, 2))
            seconds, priority = rng.randint(60, 120), "preemptible"
        elif roll < 0.45:
            profile, workers, gpus = "inference", 1, rng.choice((1, 2))
            seconds, priority = rng.randint(30, 90), "production"
        else:
            profile = "training"
            workers, gpus = rng.choice((1, 2, 2, 4)), rng.choice((2, 4, 8))
            seconds = rng.randint(20, 120)
            priority = rng.choice(("standard", "standard", "standard", "preemptible"))
        while workers * gpus > cap and workers > 1:
            workers //= 2
        gpus = min(gpus, cap)
        outcome = "Failed" if rng.random() < 1 / 12 else "Succeeded"
        return workers, gpus, seconds, profile, priority, outcome
