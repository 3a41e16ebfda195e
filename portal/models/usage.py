"""GPU utilization history (stored samples and rollups) and idle-GPU flags."""

from datetime import timedelta

from django.conf import settings
from django.db import models
from django.db.models import Q

from portal.models.jobs import Job
from portal.models.teams import Team


class UsageSample(models.Model):
    """GPU usage of one team, one job or the unattributed bucket over one time bucket.

    ``resolution`` is the bucket length in seconds: 300 (collected every 5 minutes from
    DCGM), 3600 (hourly rollup) or 86400 (daily rollup); ``start`` the bucket's start
    (UTC, aligned to the resolution). ``scope`` says what the row measures: a team
    (``team`` set, ``job`` null), a job (both set) or the unattributed bucket (both
    null: GPUs whose series carry no team namespace/pod; never a team named "").

    Figures are GPU-seconds within the bucket, so rollups are plain sums:
    ``allocated_gpu_seconds`` (GPUs held by Admitted/Running jobs x seconds, physical
    GPU-equivalents), ``reporting_gpu_seconds`` (those with a valid DCGM activity
    sample), ``busy_gpu_seconds`` (sum of activity ratios x seconds; ``NULL`` = no GPU
    reported in the whole bucket: no data, never 0 %). ``samples`` counts the 5-minute
    samples summed. Averages over the bucket are ``x_gpu_seconds / resolution``.
    ``subject`` ("team:<id>", "job:<id>", "unattributed") keys the upsert.
    """

    class Resolution(models.IntegerChoices):
        FIVE_MINUTES = 300, "5 minutes"
        HOUR = 3600, "hour"
        DAY = 86400, "day"

    class Scope(models.TextChoices):
        TEAM = "team", "team"
        JOB = "job", "job"
        UNATTRIBUTED = "unattributed", "unattributed"

    resolution = models.PositiveIntegerField(choices=Resolution.choices)
    start = models.DateTimeField()
    scope = models.CharField(max_length=16, choices=Scope.choices)
    subject = models.CharField(max_length=40)
    team = models.ForeignKey(Team, null=True, blank=True, on_delete=models.CASCADE,
                             related_name="usage_samples")
    job = models.ForeignKey(Job, null=True, blank=True, on_delete=models.CASCADE,
                            related_name="usage_samples")
    allocated_gpu_seconds = models.FloatField(default=0.0)
    reporting_gpu_seconds = models.FloatField(default=0.0)
    busy_gpu_seconds = models.FloatField(null=True, blank=True)
    samples = models.PositiveIntegerField(default=1)

    class Meta:
        ordering = ["resolution", "start", "subject"]
        constraints = [
            models.UniqueConstraint(fields=["resolution", "start", "subject"],
                                    name="usage_sample_unique_bucket"),
            models.CheckConstraint(
                condition=(Q(scope="team", team__isnull=False, job__isnull=True)
                           | Q(scope="job", team__isnull=False, job__isnull=False)
                           | Q(scope="unattributed", team__isnull=True, job__isnull=True)),
                name="usage_sample_scope_matches_keys",
            ),
        ]
        indexes = [
            models.Index(fields=["resolution", "scope", "start"], name="usage_res_scope_start"),
            models.Index(fields=["team", "resolution", "start"], name="usage_team_res_start"),
            models.Index(fields=["job", "resolution", "start"], name="usage_job_res_start"),
        ]

    def __str__(self) -> str:
        return f"{self.subject} @ {self.start:%Y-%m-%d %H:%M} ({self.resolution} s)"


class IdleFlag(models.Model):
    """A job holding GPUs whose activity stayed below its cluster's threshold for its window.

    ``state``: ``open`` (owner and lead notified), ``snoozed`` (the owner justified it,
    once), ``reclaimed`` (staff deactivated the job; never deleted), ``cleared`` (the job
    got busy again or ended). ``gpus`` are the job's physical GPUs, ``activity`` the mean
    busy ratio (0..1) over the window, ``idle_since`` the start of the idle stretch;
    ``threshold`` (0..1) and ``window_hours`` are the cluster's values when flagged.
    Staff may reclaim from ``reclaimable_at`` on (flagged + ``IDLE_GRACE_HOURS``, pushed
    to snooze end by a snooze). At most one open or snoozed flag per job.
    """

    class State(models.TextChoices):
        OPEN = "open", "open"
        SNOOZED = "snoozed", "snoozed"
        RECLAIMED = "reclaimed", "reclaimed"
        CLEARED = "cleared", "cleared"

    LIVE_STATES = (State.OPEN, State.SNOOZED)

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="idle_flags")
    state = models.CharField(max_length=16, choices=State.choices, default=State.OPEN)
    gpus = models.FloatField()
    activity = models.FloatField()
    threshold = models.FloatField()
    window_hours = models.PositiveIntegerField()
    idle_since = models.DateTimeField()
    flagged_at = models.DateTimeField()
    reclaimable_at = models.DateTimeField()
    notified_at = models.DateTimeField(null=True, blank=True)
    snoozed_at = models.DateTimeField(null=True, blank=True)
    snoozed_until = models.DateTimeField(null=True, blank=True)
    snoozed_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                   on_delete=models.SET_NULL, related_name="+")
    snooze_justification = models.TextField(blank=True)
    reclaimed_at = models.DateTimeField(null=True, blank=True)
    reclaimed_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                     on_delete=models.SET_NULL, related_name="+")
    cleared_at = models.DateTimeField(null=True, blank=True)
    clear_reason = models.CharField(max_length=200, blank=True)

    class Meta:
        ordering = ["-flagged_at", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["job"], condition=Q(state__in=["open", "snoozed"]),
                                    name="idle_flag_one_live_per_job"),
        ]
        indexes = [models.Index(fields=["state"], name="idle_flag_state")]

    def __str__(self) -> str:
        return f"idle flag #{self.pk} on job {self.job_id} ({self.state})"

    @property
    def is_live(self) -> bool:
        """True while open or snoozed."""
        return self.state in self.LIVE_STATES


#: The three resolutions, in seconds.
STEP = UsageSample.Resolution.FIVE_MINUTES.value
HOUR = UsageSample.Resolution.HOUR.value
DAY = UsageSample.Resolution.DAY.value


def retention() -> dict[int, timedelta]:
    """Retention of each resolution (seconds -> how long rows are kept), from settings."""
    return {
        STEP: timedelta(days=settings.USAGE_RETENTION_5M_DAYS),
        HOUR: timedelta(days=settings.USAGE_RETENTION_HOURLY_DAYS),
        DAY: timedelta(days=settings.USAGE_RETENTION_DAILY_DAYS),
    }
