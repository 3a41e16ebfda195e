"""Idle GPUs (anti-hoarding): flag, notify, snooze once, reclaim.

* :func:`idle_detect` (beat ``portal.idle_detect``) flags every job holding GPUs whose
  stored 5-minute activity stayed below its cluster's ``idle_threshold`` for its
  ``idle_window_hours``, and clears flags of jobs that got busy again or stopped holding
  GPUs. A new flag notifies on commit (``portal.idle_notify``).
* :func:`idle_notify` emails the job's owner and the team's leads (Django's email
  backend) and enqueues one ``portal.idle_webhook`` POST per configured webhook URL
  (cluster's and team's).
* :func:`idle_flag_snooze`: the job's owner, once, with a justification; pushes the
  earliest reclaim to the snooze's end.
* :func:`idle_flag_reclaim`: staff, after the grace period (``IDLE_GRACE_HOURS``):
  records the decision with an audit event and, on commit, ``portal.job_deactivate``
  deactivates the job on the cluster (Kueue ``spec.active: false`` on the Workload,
  Volcano an ``AbortJob`` Command); the job is never deleted.

Errors: ``ValidationError`` naming the field, ``PermissionDenied`` for a role that may not.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

import requests
from django.conf import settings
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.mail import send_mail
from django.db import transaction
from django.db.models import F, Max, Min, Q, Sum
from django.utils import timezone

from portal import access
from portal.models import Cluster, IdleFlag, Job, UsageSample
from portal.selectors.usage import team_leads
from portal.services.audit import audit_record
from portal.services.outbox import task_enqueue, task_send
from portal.services.usage import HOLDING_PHASES, STEP

log = logging.getLogger(__name__)

#: Shortest snooze justification accepted (characters, after trimming).
MIN_JUSTIFICATION = 10


@dataclass(frozen=True)
class DetectResult:
    """What :func:`idle_detect` did: ids of ``flagged`` and ``cleared`` flags."""

    flagged: list[int]
    cleared: list[int]


def _idle_stretches(cluster: Cluster, job_ids: list[int], now: datetime) -> dict[int, dict]:
    """Per job of ``cluster``: the start of its idle stretch and its mean activity over the
    window, from stored 5-minute job rows (one query).

    A bucket is busy when ``busy >= threshold x reporting`` with some GPU reporting; a
    bucket with no data is neither. ``idle_since`` = end of the last busy bucket, else the
    first bucket with data; ``None`` when the job never reported (no data is not idle).
    """
    window_start = now - timedelta(hours=cluster.idle_window_hours)
    busy_bucket = Q(reporting_gpu_seconds__gt=0,
                    busy_gpu_seconds__gte=cluster.idle_threshold * F("reporting_gpu_seconds"))
    in_window = Q(start__gte=window_start)
    rows = (
        UsageSample.objects.filter(resolution=STEP, scope=UsageSample.Scope.JOB,
                                   job_id__in=job_ids, start__lt=now)
        .values("job_id").order_by()
        .annotate(last_busy=Max("start", filter=busy_bucket),
                  first_data=Min("start", filter=Q(busy_gpu_seconds__isnull=False)),
                  busy=Sum("busy_gpu_seconds", filter=in_window),
                  reporting=Sum("reporting_gpu_seconds", filter=in_window))
    )
    out = {}
    for r in rows:
        if r["first_data"] is None:
            continue
        since = (r["last_busy"] + timedelta(seconds=STEP)) if r["last_busy"] else r["first_data"]
        activity = (r["busy"] / r["reporting"]) if r["busy"] is not None and r["reporting"] \
            else None
        out[r["job_id"]] = {"idle_since": since, "activity": activity}
    return out


def idle_detect(*, now: datetime | None = None) -> DetectResult:
    """Flag idle jobs and clear flags that no longer apply (idempotent).

    A job is flagged when it holds GPUs (Admitted/Running), its idle stretch began at
    least ``idle_window_hours`` ago, it has no live flag and was never reclaimed. A live
    flag is cleared when its job stopped holding GPUs or had a busy bucket after the
    flag's ``idle_since``. One query per cluster plus fixed reads and the writes.
    Returns a :class:`DetectResult`.
    """
    now = now or timezone.now()
    jobs = list(Job.objects.filter(phase__in=HOLDING_PHASES, deleted_at__isnull=True)
                .select_related("team__cluster", "flavor"))
    by_cluster: dict[int, list[Job]] = {}
    for job in jobs:
        by_cluster.setdefault(job.team.cluster_id, []).append(job)
    stretches: dict[int, dict] = {}
    for group in by_cluster.values():
        stretches.update(_idle_stretches(group[0].team.cluster, [j.pk for j in group], now))
    live = {f.job_id: f for f in IdleFlag.objects.filter(state__in=IdleFlag.LIVE_STATES)
            .select_related("job")}
    reclaimed = set(IdleFlag.objects.filter(state=IdleFlag.State.RECLAIMED)
                    .values_list("job_id", flat=True))
    holding = {j.pk for j in jobs}
    flagged, cleared = [], []
    grace = timedelta(hours=settings.IDLE_GRACE_HOURS)
    with transaction.atomic():
        for job_id, flag in live.items():
            reason = ""
            if job_id not in holding:
                reason = f"job is {flag.job.phase}, no longer holding GPUs"
            elif job_id in stretches and stretches[job_id]["idle_since"] > flag.idle_since:
                reason = "GPU activity rose above the threshold"
            if reason:
                flag.state, flag.cleared_at, flag.clear_reason = (
                    IdleFlag.State.CLEARED, now, reason)
                flag.save(update_fields=["state", "cleared_at", "clear_reason"])
                audit_record(actor=None, action="idle_flag.cleared", target=flag,
                             team=flag.job.team, after={"reason": reason})
                cleared.append(flag.pk)
        for job in jobs:
            s = stretches.get(job.pk)
            cluster = job.team.cluster
            if (s is None or job.pk in live or job.pk in reclaimed
                    or s["idle_since"] > now - timedelta(hours=cluster.idle_window_hours)):
                continue
            replicas = job.flavor.time_slicing_replicas or 1
            flag = IdleFlag.objects.create(
                job=job, gpus=job.workers * job.gpus_per_worker / replicas,
                activity=s["activity"] if s["activity"] is not None else 0.0,
                threshold=cluster.idle_threshold, window_hours=cluster.idle_window_hours,
                idle_since=s["idle_since"], flagged_at=now, reclaimable_at=now + grace,
            )
            audit_record(actor=None, action="idle_flag.flagged", target=flag, team=job.team,
                         after={"job": job.name, "gpus": flag.gpus, "activity": flag.activity,
                                "idle_since": flag.idle_since.isoformat()})
            flagged.append(flag.pk)
        if flagged:
            for flag_id in flagged:
                task_enqueue("portal.idle_notify", flag_id)
    return DetectResult(flagged=flagged, cleared=cleared)


def webhook_payload(flag: IdleFlag) -> dict:
    """The JSON body POSTed to webhooks: ``{event, flag, state, team, job, gpus,
    activity (0..1), threshold (0..1), idle_since, reclaimable_at}`` (ISO 8601 times)."""
    return {
        "event": "idle_gpu_flag", "flag": flag.pk, "state": flag.state,
        "team": flag.job.team.slug, "job": flag.job.name, "gpus": flag.gpus,
        "activity": flag.activity, "threshold": flag.threshold,
        "idle_since": flag.idle_since.isoformat(),
        "reclaimable_at": flag.reclaimable_at.isoformat(),
    }


def idle_notify(*, flag_id: int) -> dict:
    """Email the owner and the team's leads about flag ``flag_id`` and enqueue its webhook
    POSTs; once per flag (``notified_at``). Returns ``{"emailed": [addresses],
    "webhooks": [urls]}`` (both empty when already notified or the flag is gone)."""
    flag = (IdleFlag.objects.select_related("job__team__cluster", "job__submitter")
            .filter(pk=flag_id, notified_at__isnull=True).first())
    if flag is None:
        return {"emailed": [], "webhooks": []}
    job, team = flag.job, flag.job.team
    people = ([job.submitter] if job.submitter else []) + team_leads(
        team_ids=[team.pk]).get(team.pk, [])
    emails = sorted({u.email for u in people if u.email})
    percent = f"{flag.activity * 100:.1f} %"
    body = (
        f"Job {team.slug}/{job.name} holds {flag.gpus:g} GPUs whose activity has stayed "
        f"below {flag.threshold * 100:g} % since {flag.idle_since:%Y-%m-%d %H:%M} UTC "
        f"(mean {percent} over the last {flag.window_hours} h).\n\n"
        f"If the job still needs its GPUs, its owner can snooze this once with a "
        f"justification on the team's utilization page (/teams/{team.slug}/utilization/). "
        f"From {flag.reclaimable_at:%Y-%m-%d %H:%M} UTC platform staff may reclaim the "
        f"GPUs: the job is deactivated (not deleted).\n"
    )
    if emails:
        send_mail(f"[GPU portal] Idle GPUs: {team.slug}/{job.name}", body,
                  settings.DEFAULT_FROM_EMAIL, emails)
    urls = [u for u in (team.cluster.idle_webhook_url, team.idle_webhook_url) if u]
    IdleFlag.objects.filter(pk=flag.pk).update(notified_at=timezone.now())
    for url in urls:
        task_send("portal.idle_webhook", flag.pk, url)
    return {"emailed": emails, "webhooks": urls}


def idle_webhook_post(*, flag_id: int, url: str, timeout: float = 10.0) -> int | None:
    """POST :func:`webhook_payload` of flag ``flag_id`` to ``url``; the HTTP status, or
    ``None`` when the flag is gone. Raises ``requests.RequestException`` (an ``OSError``:
    the task retries) on a connection failure or a non-2xx answer."""
    flag = IdleFlag.objects.select_related("job__team").filter(pk=flag_id).first()
    if flag is None:
        return None
    response = requests.post(url, json=webhook_payload(flag), timeout=timeout)
    response.raise_for_status()
    return response.status_code


def idle_flag_snooze(*, actor, flag: IdleFlag, justification: str,
                     now: datetime | None = None) -> IdleFlag:
    """The job's owner snoozes ``flag`` once, with a justification.

    The flag becomes ``snoozed`` until now + ``IDLE_SNOOZE_HOURS``; staff may reclaim
    only after that (and after the grace period). Raises ``PermissionDenied`` for anyone
    but the owner; ``ValidationError`` ``{"justification"}`` for fewer than
    :data:`MIN_JUSTIFICATION` characters, ``{"flag"}`` for a flag not open or already
    snoozed once. Nothing is written on error.
    """
    now = now or timezone.now()
    text = (justification or "").strip()
    if actor is None or flag.job.submitter_id != getattr(actor, "pk", None):
        raise PermissionDenied("Only the job's owner can snooze its idle flag.")
    if len(text) < MIN_JUSTIFICATION:
        raise ValidationError({"justification": f"Say why the GPUs are needed (at least "
                                                f"{MIN_JUSTIFICATION} characters)."})
    with transaction.atomic():
        locked = IdleFlag.objects.select_for_update().get(pk=flag.pk)
        if locked.snoozed_at is not None:
            raise ValidationError({"flag": "This flag was already snoozed once."})
        if locked.state != IdleFlag.State.OPEN:
            raise ValidationError({"flag": f"This flag is {locked.state}; only an open flag "
                                           "can be snoozed."})
        before = {"state": locked.state, "reclaimable_at": locked.reclaimable_at.isoformat()}
        until = now + timedelta(hours=settings.IDLE_SNOOZE_HOURS)
        locked.state = IdleFlag.State.SNOOZED
        locked.snoozed_at, locked.snoozed_until, locked.snoozed_by = now, until, actor
        locked.snooze_justification = text
        locked.reclaimable_at = max(locked.reclaimable_at, until)
        locked.save()
        audit_record(actor=actor, action="idle_flag.snoozed", target=locked,
                     team=flag.job.team, before=before,
                     after={"state": locked.state, "justification": text,
                            "reclaimable_at": locked.reclaimable_at.isoformat()})
    return locked


def idle_flag_reclaim(*, actor, flag: IdleFlag, now: datetime | None = None) -> IdleFlag:
    """Staff reclaim the GPUs of ``flag``'s job: deactivate it, never delete it.

    Records ``reclaimed`` with an ``idle_flag.reclaimed`` audit event in one transaction,
    then on commit ``portal.job_deactivate`` deactivates the job on its cluster
    (:func:`portal.services.deactivate.job_deactivate`). Raises ``PermissionDenied`` for
    non-staff; ``ValidationError`` ``{"flag"}`` when the flag is not live or its grace
    period (or snooze) has not ended. Nothing is written on error.
    """
    now = now or timezone.now()
    if not access.is_staff(actor):
        raise PermissionDenied("Only platform staff can reclaim GPUs.")
    with transaction.atomic():
        locked = IdleFlag.objects.select_for_update(of=("self",)).select_related("job__team").get(
            pk=flag.pk)
        if locked.state not in IdleFlag.LIVE_STATES:
            raise ValidationError({"flag": f"This flag is {locked.state}; nothing to reclaim."})
        if now < locked.reclaimable_at:
            raise ValidationError({"flag": "The grace period runs until "
                                           f"{locked.reclaimable_at:%Y-%m-%d %H:%M} UTC."})
        before = {"state": locked.state, "job_phase": locked.job.phase}
        locked.state, locked.reclaimed_at, locked.reclaimed_by = (
            IdleFlag.State.RECLAIMED, now, actor)
        locked.save(update_fields=["state", "reclaimed_at", "reclaimed_by"])
        audit_record(actor=actor, action="idle_flag.reclaimed", target=locked,
                     team=locked.job.team, before=before,
                     after={"state": locked.state, "job": locked.job.name,
                            "gpus": locked.gpus, "deactivate": True})
        task_enqueue("portal.job_deactivate", locked.job_id)
    return locked
