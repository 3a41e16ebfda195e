"""Deactivate a job on its cluster without deleting it: the backend's ``deactivate``.

* Kueue: merge-patch ``spec.active: false`` on the job's Workload; Kueue then
  evicts it and its pods stop, while the Job and the Workload stay.
* Volcano: an ``AbortJob`` Command targeting the live vcjob; Volcano kills the
  pods and keeps the job in ``Aborted``.

Used by idle-GPU reclaim (``portal.job_deactivate``); idempotent (a Workload already
inactive is patched to the same value; a vcjob already aborting or stopped is left alone).
"""

from __future__ import annotations

from portal.backends import JobRef, backend_for
from portal.models import Job
from portal.services.audit import audit_record
from portal.services.reconcile import cluster_port


def job_deactivate(*, job_id: int, port=None) -> dict | None:
    """Deactivate job ``job_id`` on its cluster (never delete it) and audit it.

    ``port``: a cluster port to use instead of :func:`cluster_port`. Returns what was done
    (``{"backend", "kind", "name", ...}``), or ``None`` when the job is gone. Raises
    :class:`queues.errors.TransientError` (retry) or :class:`PermanentError`.
    """
    job = Job.objects.select_related("team__cluster").filter(pk=job_id).first()
    if job is None:
        return None
    cluster = job.team.cluster
    port = port or cluster_port(cluster=cluster)
    kind = "JobSet" if job.kind == Job.Kind.JOBSET else "Job"
    ref = JobRef("", kind, job.name, job.team.slug, uid=job.cluster_uid or "", job_id=str(job.pk))
    done = backend_for(cluster).deactivate(port, ref)
    audit_record(actor=None, action="job.deactivated", target=job, team=job.team,
                 before={"phase": job.phase}, after=done)
    return done
