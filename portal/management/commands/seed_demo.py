"""``manage.py seed_demo``: the demo world (idempotent): logins, a cluster, flavors,
cohorts, teams with quotas, priority classes and a few pending requests.

A rerun on an existing database does what its variables say and prints what it kept:
a different ``SCHEDULER_BACKEND`` switches the demo cluster's backend (through
``cluster_backend_set``, as staff would; team weights follow the backend's rules),
and jobs an earlier run left live are closed, since the simulated cluster starts
empty each run (``Failed``, reason ``DemoRestarted``). ``make clean`` (or removing
``var/``) starts from nothing.
"""

from decimal import Decimal

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from django.db import transaction
from django.utils import timezone

from portal.models import (
    Cluster,
    Cohort,
    GpuFlavor,
    Job,
    Membership,
    PriorityClass,
    QuotaGrant,
    QuotaRequest,
    Team,
)
from portal.services.catalog import cluster_backend_set

#: (username, password, is_staff, description). Demo only: refused with DEBUG off.
DEMO_USERS = (
    ("admin", "admin-demo-pass", True, "platform staff (admin console, reviews requests)"),
    ("alice", "alice-demo-pass", False, "lead of team nlp-research"),
    ("bob", "bob-demo-pass", False, "member of team nlp-research"),
    ("carol", "carol-demo-pass", False, "lead of team vision"),
)

FLAVORS = (  # name, resource, model, physical GPUs, cpu/GPU, memory/GPU, node label value
    ("h100", "nvidia.com/gpu", "H100", 64, "12", "96Gi", "NVIDIA-H100-80GB-HBM3"),
    ("a100", "nvidia.com/gpu", "A100", 32, "8", "64Gi", "NVIDIA-A100-SXM4-80GB"),
    ("a100-mig-1g", "nvidia.com/mig-1g.10gb", "A100 MIG 1g.10gb", 8, "2", "12Gi",
     "NVIDIA-A100-SXM4-80GB"),
)
COHORTS = (("research", Decimal("2")), ("product", Decimal("1")))
TEAMS = (  # slug, name, cohort, weight, {flavor: (nominal, borrowing, lending)}
    ("nlp-research", "NLP research", "research", "1",
     {"h100": (24, 16, None), "a100-mig-1g": (16, None, None)}),
    ("vision", "Computer vision", "research", "1", {"h100": (16, 8, 8), "a100": (8, None, None)}),
    ("speech", "Speech", "research", "0.5", {"a100": (8, 8, None)}),
    ("search-ranking", "Search ranking", "product", "1", {"h100": (16, None, 8)}),
    ("recsys", "Recommendations", "product", "1", {"a100": (16, 8, None)}),
    ("notebooks", "Shared notebooks", None, "1", {"a100-mig-1g": (24, None, None)}),
)
PRIORITIES = (("production", 1000, "serving and deadline-bound training"),
              ("standard", 100, "default for training jobs"),
              ("preemptible", 10, "best effort; first to be preempted"))


class Command(BaseCommand):
    """Create or refresh the demo world and print the logins."""

    help = "Seed the demo world (logins, cluster, flavors, cohorts, teams, quotas, requests)."

    def handle(self, *args, **options) -> None:
        """All in one transaction; prints one login per line."""
        if not settings.DEBUG:
            self.stderr.write("seed_demo only runs with DEBUG on (demo passwords are public).")
            raise SystemExit(2)
        with transaction.atomic():
            users = self._users()
            cluster, created = Cluster.objects.get_or_create(
                name="demo", defaults={"backend": settings.SCHEDULER_BACKEND})
            kept = [] if created else self._rerun(cluster)
            volcano_wanted = settings.SCHEDULER_BACKEND == Cluster.Backend.VOLCANO
            flavors = {}
            for name, resource, model, gpus, cpu, memory, product in FLAVORS:
                flavors[name], _ = GpuFlavor.objects.get_or_create(
                    cluster=cluster, name=name, defaults={
                        "gpu_resource": resource, "gpu_model": model, "physical_gpus": gpus,
                        "cpu_per_gpu": cpu, "memory_per_gpu": memory,
                        "node_labels": {"nvidia.com/gpu.product": product}})
            cohorts = {
                name: Cohort.objects.get_or_create(cluster=cluster, name=name,
                                                   defaults={"weight": weight})[0]
                for name, weight in COHORTS
            }
            teams = {}
            for slug, name, cohort, weight, grants in TEAMS:
                # Volcano Queue weights are whole numbers: 0.5 becomes 1 there.
                weight = max(Decimal(1), Decimal(weight).to_integral_value()) \
                    if volcano_wanted else Decimal(weight)
                teams[slug], made = Team.objects.get_or_create(slug=slug, defaults={
                    "name": name, "cluster": cluster, "weight": weight,
                    "cohort": cohorts.get(cohort)})
                if not made and teams[slug].weight != weight \
                        and cluster.backend != settings.SCHEDULER_BACKEND:
                    Team.objects.filter(pk=teams[slug].pk).update(weight=weight)
                for flavor, (nominal, borrowing, lending) in grants.items():
                    QuotaGrant.objects.get_or_create(
                        team=teams[slug], flavor=flavors[flavor], defaults={
                            "nominal_gpus": nominal, "borrowing_limit_gpus": borrowing,
                            "lending_limit_gpus": lending})
            for username, slug, role in (("alice", "nlp-research", "lead"),
                                         ("bob", "nlp-research", "member"),
                                         ("carol", "vision", "lead")):
                Membership.objects.get_or_create(user=users[username], team=teams[slug],
                                                 defaults={"role": role})
            for name, value, description in PRIORITIES:
                PriorityClass.objects.get_or_create(
                    name=name, defaults={"value": value, "description": description})
            if not QuotaRequest.objects.exists():
                QuotaRequest.objects.create(
                    team=teams["nlp-research"], flavor=flavors["h100"], requested_by=users["alice"],
                    nominal_gpus=32, borrowing_limit_gpus=16,
                    justification="7B model pretraining needs 32 H100 for 3 weeks")
                QuotaRequest.objects.create(
                    team=teams["vision"], flavor=flavors["a100"], requested_by=users["carol"],
                    nominal_gpus=16, justification="video model fine-tuning")
            if cluster.backend != settings.SCHEDULER_BACKEND:
                before = cluster.backend
                cluster_backend_set(actor=users["admin"], cluster=cluster,
                                    backend=settings.SCHEDULER_BACKEND)
                kept.append(f"switched cluster demo from {before} to {cluster.backend} "
                            "(its teams, quotas and past jobs are kept)")
        for line in kept:
            self.stdout.write(f"Rerun: {line}")
        if kept:
            self.stdout.write("Rerun: to start from nothing, stop the demo and run `make clean`.")
        self.stdout.write("Demo logins:")
        for username, password, _, description in DEMO_USERS:
            self.stdout.write(f"  {username:<8} / {password:<18} {description}")

    @staticmethod
    def _rerun(cluster: Cluster) -> list[str]:
        """On a rerun: close the jobs an earlier run left live (the simulated cluster
        starts empty, so they are gone); return what was kept, in words."""
        now = timezone.now()
        live = Job.objects.filter(team__cluster=cluster, deleted_at__isnull=True).exclude(
            phase__in=Job.FINAL_PHASES)
        closed = live.update(
            phase=Job.Phase.FAILED, reason="DemoRestarted", queue_position=None,
            message="The demo was restarted: its simulated cluster starts empty, so this "
                    "job of an earlier run is gone.", finished_at=now, deleted_at=now)
        total = Job.objects.filter(team__cluster=cluster).count()
        lines = [f"kept the database of an earlier run ({total} jobs, quotas, requests)"]
        if closed:
            lines.append(f"closed {closed} job{'s' if closed != 1 else ''} the earlier run "
                         "left live (reason DemoRestarted)")
        return lines

    def _users(self) -> dict:
        user_model = get_user_model()
        users = {}
        for username, password, is_staff, _ in DEMO_USERS:
            user, _ = user_model.objects.get_or_create(username=username)
            user.is_staff = user.is_superuser = is_staff
            user.set_password(password)
            user.save()
            users[username] = user
        return users
