"""Plain factory functions for test data (no dependency): rows made with the ORM.

Each takes keyword arguments with sensible defaults and returns the saved row,
so a test states only what matters to it::

    cluster = make_cluster()
    flavor = make_flavor(cluster=cluster, physical_gpus=16)
    team = make_team(cluster=cluster, cohort=make_cohort(cluster=cluster))
    lead = make_user("lena", team=team, role="lead")
    make_request(team=team, flavor=flavor, requested_by=lead, nominal_gpus=8)
"""

import itertools

from django.contrib.auth import get_user_model

from portal.models import Cluster, Cohort, GpuFlavor, Membership, QuotaGrant, QuotaRequest, Team

PASSWORD = "test-pass-123"  # noqa: S105 - test users only
_seq = itertools.count(1)


def _n() -> int:
    return next(_seq)


def make_cluster(*, name: str | None = None, **fields) -> Cluster:
    """A Kueue cluster named ``name`` (default ``cluster-<n>``)."""
    return Cluster.objects.create(name=name or f"cluster-{_n()}", **fields)


def make_flavor(*, cluster: Cluster, name: str | None = None, physical_gpus: int = 16,
                **fields) -> GpuFlavor:
    """A GPU flavor of ``cluster`` with ``physical_gpus`` physical GPUs."""
    fields.setdefault("gpu_model", "NVIDIA-A100-SXM4-80GB")
    fields.setdefault("node_labels", {"nvidia.com/gpu.product": fields["gpu_model"]})
    return GpuFlavor.objects.create(
        cluster=cluster, name=name or f"flavor-{_n()}", physical_gpus=physical_gpus, **fields
    )


def make_cohort(*, cluster: Cluster, name: str | None = None, **fields) -> Cohort:
    """A cohort (department) of ``cluster``."""
    return Cohort.objects.create(cluster=cluster, name=name or f"cohort-{_n()}", **fields)


def make_team(*, cluster: Cluster, slug: str | None = None, cohort: Cohort | None = None,
              name: str | None = None, **fields) -> Team:
    """A team of ``cluster`` (in ``cohort`` when given)."""
    slug = slug or f"team-{_n()}"
    return Team.objects.create(
        cluster=cluster, slug=slug, name=name or slug.replace("-", " ").title(), cohort=cohort,
        **fields,
    )


def make_user(username: str | None = None, *, team: Team | None = None, role: str = "member",
              staff: bool = False, password: str = PASSWORD):
    """A user (password :data:`PASSWORD`), with ``role`` (member|lead) in ``team`` if given."""
    user = get_user_model().objects.create_user(
        username or f"user-{_n()}", password=password, is_staff=staff
    )
    if team is not None:
        Membership.objects.create(user=user, team=team, role=role)
    return user


def make_grant(*, team: Team, flavor: GpuFlavor, nominal_gpus: int = 0,
               borrowing_limit_gpus: int | None = None, lending_limit_gpus: int | None = None,
               **fields) -> QuotaGrant:
    """The quota ``team`` holds on ``flavor``."""
    return QuotaGrant.objects.create(
        team=team, flavor=flavor, nominal_gpus=nominal_gpus,
        borrowing_limit_gpus=borrowing_limit_gpus, lending_limit_gpus=lending_limit_gpus, **fields,
    )


def make_request(*, team: Team, flavor: GpuFlavor, requested_by=None, nominal_gpus: int = 8,
                 justification: str = "Training runs for the next release.",
                 **fields) -> QuotaRequest:
    """A quota request of ``team`` on ``flavor`` (pending unless ``state`` is given)."""
    return QuotaRequest.objects.create(
        team=team, flavor=flavor, requested_by=requested_by, nominal_gpus=nominal_gpus,
        justification=justification, **fields,
    )


def make_job(*, team: Team, flavor: GpuFlavor, name: str | None = None, workers: int = 1,
             gpus_per_worker: int = 1, phase: str = "Running", **fields):
    """A gang job of ``team`` on ``flavor`` in ``phase`` (default Running)."""
    from portal.models import Job

    fields.setdefault("image", "ghcr.io/example/train:1.0")
    return Job.objects.create(
        team=team, flavor=flavor, name=name or f"job-{_n()}", workers=workers,
        gpus_per_worker=gpus_per_worker, phase=phase, **fields,
    )
