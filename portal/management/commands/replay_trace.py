"""``manage.py replay_trace PATH --format philly|elasticflow``: replay a real GPU trace
through the portal's REST API (see :mod:`portal.replay` and :mod:`queues.traces`)."""

from __future__ import annotations

import ipaddress
import os
import sys
import time
from urllib.parse import urlparse

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from tqdm import tqdm

from portal import replay
from portal.services.tokens import token_issue
from queues import traces

#: The user a local replay acts as when no staff user exists yet.
REPLAY_USER = "trace-replay"


def _is_local(api_url: str) -> bool:
    host = urlparse(api_url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def local_staff_token() -> str:
    """A new token of a staff user of this process's database: the first active staff
    user by id, else a new staff user ``trace-replay`` (no usable password). Named
    ``replay-trace``, valid one day; it replaces that user's earlier ``replay-trace``
    tokens (tokens are stored hashed: a secret cannot be read back)."""
    users = get_user_model().objects
    user = users.filter(is_staff=True, is_active=True).order_by("pk").first()
    if user is None:
        user = users.create_user(REPLAY_USER, password=None, is_staff=True)
    _, secret = token_issue(actor=None, user=user, name="replay-trace", days=1, rotate=True)
    return secret


class Command(BaseCommand):
    """Submit a trace's jobs at their (accelerated) submit times, wait, print a summary."""

    help = ("Replay a GPU-cluster trace (Philly or ElasticFlow) through the portal's REST API: "
            "one gang job per trace job at its submit time / --speed, then wait for every job "
            "to finish and print per-team wait figures.")

    def add_arguments(self, parser) -> None:
        """PATH, --format and the replay options (see ``--help``)."""
        parser.add_argument("path", help="philly.csv, or an ElasticFlow clusterNN.csv or folder")
        parser.add_argument("--format", required=True, choices=traces.FORMATS, dest="fmt")
        parser.add_argument("--speed", type=float, default=3600.0,
                            help="time compression: trace seconds per wall second (3600)")
        parser.add_argument("--limit", type=int, default=None,
                            help="replay at most this many jobs (after --since)")
        parser.add_argument("--since", default=None,
                            help="skip jobs submitted earlier: seconds from the trace start, "
                                 "or a timestamp on the trace's clock (Philly)")
        parser.add_argument("--api-url", default=os.environ.get("PORTAL_URL",
                                                                "http://127.0.0.1:8000"),
                            help="the portal to submit to (default $PORTAL_URL or "
                                 "http://127.0.0.1:8000)")
        parser.add_argument("--token", default=os.environ.get("PORTAL_TOKEN", ""),
                            help="API token (default $PORTAL_TOKEN; for a portal on loopback, "
                                 "a staff user's token from this database)")
        parser.add_argument("--create-teams", action="store_true",
                            help="create a cohort and one team per virtual cluster, with "
                                 "quotas sized by their share of GPU-hours")
        parser.add_argument("--flavor", default="h100", help="GPU flavor of every job (h100)")
        parser.add_argument("--cluster", default=None,
                            help="cluster of the flavor (needed if the name is in several)")
        parser.add_argument("--cohort", default=None,
                            help="cohort of created teams (default trace-<format>)")
        parser.add_argument("--capacity", type=int, default=None,
                            help="GPUs shared out by --create-teams (default: the flavor's "
                                 "physical GPUs)")
        parser.add_argument("--image", default="docker.io/library/busybox:1.36",
                            help="container image of every job")
        parser.add_argument("--name-prefix", default="trace",
                            help="job names are <prefix>-<trace job id>")
        parser.add_argument("--priority", default=None, help="priority class of every job")
        parser.add_argument("--no-wait", action="store_true",
                            help="do not wait for the jobs to finish (summary of submissions)")
        parser.add_argument("--timeout", type=float, default=3600.0,
                            help="seconds to wait for every job to reach a final phase (3600)")
        parser.add_argument("--poll-interval", type=float, default=2.0)
        parser.add_argument("--concurrency", type=int, default=1,
                            help="POSTs in flight at once (1: one after another); more keep a "
                                 "fast replay on schedule when the portal answers slower than "
                                 "the jobs arrive")
        parser.add_argument("--retries", type=int, default=5,
                            help="retries of a request on connection errors (5)")

    def handle(self, *args, path: str, fmt: str, speed: float, limit, since, api_url: str,
               token: str, create_teams: bool, flavor: str, cluster, cohort, capacity,
               image: str, name_prefix: str, priority, no_wait: bool, timeout: float,
               poll_interval: float, retries: int, concurrency: int = 1, **options) -> None:
        """Read the trace, set up teams (optionally), submit, wait, summarize.

        Raises :class:`CommandError` naming the option or field for bad input,
        a trace that cannot be read, or a portal step refused.
        """
        if not speed > 0:
            raise CommandError("--speed: must be > 0")
        if limit is not None and limit < 0:
            raise CommandError("--limit: must be >= 0")
        if concurrency < 1:
            raise CommandError("--concurrency: must be >= 1")
        if capacity is not None and capacity < 0:
            raise CommandError("--capacity: must be >= 0")
        if not name_prefix[:1].isalpha() or len(name_prefix) > 10:
            raise CommandError("--name-prefix: must start with a letter, at most 10 characters")
        if not token:
            if not _is_local(api_url):
                raise CommandError("--token: required for a portal that is not on loopback")
            token = local_staff_token()
        started = time.monotonic()
        stats = traces.TraceStats()
        try:
            jobs = list(traces.read_trace(path, fmt, since=traces.parse_since(since),
                                          limit=limit, stats=stats))
        except traces.TraceError as exc:
            raise CommandError(str(exc)) from exc
        skipped = ", ".join(f"{reason} x{n}" for reason, n in sorted(stats.skipped.items()))
        self.stdout.write(
            f"trace: {stats.rows} rows read, {stats.duplicates} exact duplicates dropped, "
            f"{stats.skipped_total} skipped{f' ({skipped})' if skipped else ''}, "
            f"{stats.before_since} before --since; {len(jobs)} jobs to replay "
            f"({len({j.vc for j in jobs})} teams, "
            f"{sum(j.gpu_hours for j in jobs):,.0f} GPU-hours)")
        if not jobs:
            return
        client = replay.PortalClient(api_url, token, retries=retries)
        try:
            info = replay.find_flavor(client, flavor=flavor, cluster=cluster)
            if create_teams:
                plans = replay.ensure_teams(
                    client, fmt=fmt, gpu_hours=traces.gpu_hours_by_vc(jobs), flavor=info,
                    cohort=cohort or f"trace-{fmt}", capacity=capacity)
                for plan in plans:
                    self.stdout.write(
                        f"team {plan.team}: {plan.gpu_hours:,.1f} GPU-hours -> "
                        f"{plan.nominal_gpus} nominal {info.name}"
                        f"{' (created)' if plan.created else ''}"
                        f"{' (quota set)' if plan.changed else ''}")

            def payload(job: traces.TraceJob) -> dict:
                return replay.job_payload(job, fmt=fmt, flavor=info.name,
                                          gpus_per_node=info.gpus_per_node, image=image,
                                          name_prefix=name_prefix, priority=priority)

            span = jobs[-1].submit_time - jobs[0].submit_time
            self.stdout.write(f"submitting {len(jobs)} jobs over {span / speed:,.1f} s "
                              f"(speed {speed:g}) to {api_url}")
            submit_start = time.monotonic()
            with tqdm(total=len(jobs), desc="submit", unit="job", file=sys.stderr,
                      disable=None) as bar:
                submissions = replay.submit_jobs(client, jobs, speed=speed, payload=payload,
                                                 progress=bar, concurrency=concurrency)
            submitted_in = time.monotonic() - submit_start
            accepted = sum(1 for s in submissions if s.job_id is not None)
            self.stdout.write(
                f"submitted {accepted} of {len(jobs)} jobs in {submitted_in:.1f} s "
                f"({len(jobs) / max(submitted_in, 1e-9):.1f} jobs/s, concurrency {concurrency}; "
                f"at most "
                f"{max(s.late for s in submissions):.1f} s behind schedule)")
            latest: dict = {}
            if not no_wait:
                with tqdm(total=accepted, desc="finish", unit="job", file=sys.stderr,
                          disable=None) as bar:
                    latest, all_final = replay.poll_jobs(client, submissions, timeout=timeout,
                                                         interval=poll_interval, progress=bar)
                if not all_final:
                    self.stdout.write(f"timeout: not every job reached a final phase within "
                                      f"{timeout:g} s")
        except replay.ReplayError as exc:
            raise CommandError(str(exc)) from exc
        replay.write_summary(self.stdout, replay.summarize(submissions, latest), submissions)
        self.stdout.write(f"wall time {time.monotonic() - started:.1f} s")
