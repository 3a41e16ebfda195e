"""Gang jobs: what a team submitted (intent) and what the cluster did with it (observed)."""

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from portal.models.clusters import GpuFlavor, PriorityClass
from portal.models.teams import Team
from portal.models.validators import validate_dns1123_label


class Job(models.Model):
    """A gang job of a team: a suspended batch/v1 Indexed Job or a JobSet under Kueue.

    Intent (written once by ``job_submit``): ``name`` (DNS-1123 label, unique in
    the team among live jobs: a finished job's name may be reused), ``image``, ``command``/
    ``args`` (JSON lists of strings), ``env`` (JSON list of ``{name, value}``),
    ``workers`` (pods started together), ``gpus_per_worker`` (whole GPUs of
    ``flavor``'s resource, request == limit), ``cpu_per_worker`` /
    ``memory_per_worker`` (Kubernetes quantities), ``priority_class``,
    ``kind`` (``job`` = Indexed Job, ``jobset`` = JobSet with a headless
    service), ``max_runtime_seconds`` (``activeDeadlineSeconds``; ``None`` = no
    limit). ``manifest`` is the rendered object sent to the cluster.

    Simulated clusters only (the demo, trace replay): ``sim_duration_seconds``
    (running time once started), ``sim_outcome`` (``Succeeded``/``Failed``) and
    ``sim_profile`` (GPU activity: ``training``/``notebook``/``inference``), all
    optional, rendered as ``sim.portal.gpu/*`` annotations only when set
    (:func:`queues.jobs.sim_annotations`); a real Kueue or Volcano ignores them.

    Observed (written by ``job_sync`` from the Workload, the job and events):
    ``phase`` (see :class:`Phase`), ``reason`` (a short code) and ``message``
    (plain words), ``queue_position`` (0-based, from Kueue's visibility API;
    ``None`` when not pending), ``admitted_flavor``, ``preemptions`` (count),
    ``last_preemptor``, ``preemption_times`` (ISO timestamps), ``preemption_loop``
    (3 or more preemptions within 60 minutes), ``timeline`` (list of
    ``{at, source, type, reason, message}``), timestamps, ``cluster_uid`` (the
    job object's uid), ``last_error`` (the last cluster error).
    ``partly_placed_since`` (Volcano): when ``job_sync`` first saw the gang with some
    but fewer than ``minAvailable`` pods running (``None`` otherwise); the clock of
    "gang partly placed" (:data:`queues.volcano_jobs.PARTLY_PLACED_AFTER`).
    ``deleted_at`` is set once the job object is gone from the cluster (cancel);
    its name may then be reused.
    """

    class Phase(models.TextChoices):
        SUBMITTED = "Submitted", "Submitted"
        QUEUED = "Queued", "Queued"
        ADMITTED = "Admitted", "Admitted"
        RUNNING = "Running", "Running"
        SUCCEEDED = "Succeeded", "Succeeded"
        FAILED = "Failed", "Failed"
        CANCELLED = "Cancelled", "Cancelled"

    class Kind(models.TextChoices):
        JOB = "job", "Indexed Job (batch/v1)"
        JOBSET = "jobset", "JobSet (multi-node, headless service)"

    #: Phases after which the job never changes again.
    FINAL_PHASES = (Phase.SUCCEEDED, Phase.FAILED, Phase.CANCELLED)

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="jobs")
    submitter = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="jobs"
    )
    name = models.CharField(max_length=63, validators=[validate_dns1123_label])
    image = models.CharField(max_length=512)
    command = models.JSONField(default=list, blank=True)
    args = models.JSONField(default=list, blank=True)
    env = models.JSONField(default=list, blank=True)
    workers = models.PositiveIntegerField(default=1)
    gpus_per_worker = models.PositiveIntegerField(default=1)
    flavor = models.ForeignKey(GpuFlavor, on_delete=models.PROTECT, related_name="jobs")
    cpu_per_worker = models.CharField(max_length=32, blank=True)
    memory_per_worker = models.CharField(max_length=32, blank=True)
    priority_class = models.ForeignKey(
        PriorityClass, null=True, blank=True, on_delete=models.PROTECT, related_name="jobs"
    )
    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.JOB)
    max_runtime_seconds = models.PositiveIntegerField(null=True, blank=True)
    sim_duration_seconds = models.PositiveIntegerField(null=True, blank=True)
    sim_outcome = models.CharField(max_length=16, blank=True)
    sim_profile = models.CharField(max_length=16, blank=True)

    phase = models.CharField(max_length=16, choices=Phase.choices, default=Phase.SUBMITTED)
    reason = models.CharField(max_length=128, blank=True)
    message = models.TextField(blank=True)
    queue_position = models.PositiveIntegerField(null=True, blank=True)
    admitted_flavor = models.CharField(max_length=63, blank=True)
    preemptions = models.PositiveIntegerField(default=0)
    last_preemptor = models.CharField(max_length=253, blank=True)
    preemption_times = models.JSONField(default=list, blank=True)
    preemption_loop = models.BooleanField(default=False)
    timeline = models.JSONField(default=list, blank=True)

    submitted_at = models.DateTimeField(auto_now_add=True)
    admitted_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    cancel_requested_at = models.DateTimeField(null=True, blank=True)
    deleted_at = models.DateTimeField(null=True, blank=True)
    status_synced_at = models.DateTimeField(null=True, blank=True)
    partly_placed_since = models.DateTimeField(null=True, blank=True)

    manifest = models.JSONField(null=True, blank=True)
    cluster_uid = models.CharField(max_length=64, blank=True)
    last_error = models.TextField(blank=True)

    class Meta:
        ordering = ["-submitted_at", "-id"]
        indexes = [
            models.Index(fields=["team", "phase"], name="job_team_phase"),
            models.Index(fields=["phase"], name="job_phase"),
        ]
        constraints = [
            # A finished job's name may be reused (job_create first deletes the
            # finished namesake from the cluster).
            models.UniqueConstraint(
                fields=["team", "name"],
                condition=Q(deleted_at__isnull=True)
                & ~Q(phase__in=["Succeeded", "Failed", "Cancelled"]),
                name="job_name_unique_per_team_live",
            ),
            models.CheckConstraint(condition=Q(workers__gte=1), name="job_workers_gte_1"),
            models.CheckConstraint(
                condition=Q(gpus_per_worker__gte=1), name="job_gpus_per_worker_gte_1"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.team}/{self.name} ({self.phase})"

    @property
    def total_gpus(self) -> int:
        """GPUs of the whole gang: ``workers * gpus_per_worker``."""
        return self.workers * self.gpus_per_worker

    @property
    def wait_seconds(self) -> float | None:
        """Seconds the job waited (or has waited so far) for admission: from
        ``submitted_at`` to ``admitted_at``; while not yet admitted, to now (to
        ``finished_at`` for a job that ended without admission). ``None`` when the job
        has no submit time yet. A re-queued job counts its first admission."""
        if self.submitted_at is None:
            return None
        end = self.admitted_at or self.finished_at or timezone.now()
        return max(0.0, (end - self.submitted_at).total_seconds())

    @property
    def queue_rank(self) -> int | None:
        """The 1-based place in the ClusterQueue's pending list ("1 = next"), from
        ``queue_position`` (Kueue's and Volcano's 0-based position); ``None`` when not
        pending or unknown."""
        return None if self.queue_position is None else self.queue_position + 1

    @property
    def is_final(self) -> bool:
        """True once the job is Succeeded, Failed or Cancelled."""
        return self.phase in self.FINAL_PHASES
