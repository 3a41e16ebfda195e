"""Deactivate a job on its cluster without deleting it: one dispatch per scheduler backend.

* Kueue: merge-patch ``spec.active: false`` on the job's Workload
  (``KubernetesCluster.deactivate_workload``); Kueue then
  evicts it and its pods stop, while the Job and the Workload stay.
* Volcano: a ``bus.volcano.sh/v1alpha1`` ``Command`` with action ``AbortJob`` targeting
  the live vcjob (``queues.volcano_jobs.render_command``, sent with the port's
  ``issue_command``); Volcano kills the pods and keeps
  the job in ``Aborted``.

Used by idle-GPU reclaim (``portal.job_deactivate``); idempotent (a Workload already
inactive is patched to the same value; a vcjob already aborting or stopped is left alone).
"""

from __future__ import annotations

from collections.abc import Callable

from portal.models import Cluster, Job
from portal.services.audit import audit_record
from portal.services.reconcile import cluster_port
from queues.errors import PermanentError


def _kueue(port, job: Job) -> dict:
    from queues.jobs import workload_for_job

    namespace = job.team.slug
    kind = "JobSet" if job.kind == Job.Kind.JOBSET else "Job"
    workloads = port.list_workloads(namespace)
    workload = workload_for_job(workloads, {"kind": kind, "metadata": {
        "name": job.name, "uid": job.cluster_uid}})
    if workload is None:
        raise PermanentError(f"no Kueue Workload found for {namespace}/{job.name}",
                             reason="NotFound")
    name = workload["metadata"]["name"]
    patched = port.deactivate_workload(namespace, name)
    return {"backend": "kueue", "kind": "Workload", "name": name,
            "active": None if patched is None else patched["spec"].get("active")}


#: vcjob phases in which its pods are already stopped (nothing to abort).
_VOLCANO_STOPPED = ("Aborting", "Aborted", "Terminating", "Terminated", "Completed", "Failed")


def _volcano(port, job: Job) -> dict:
    from queues import volcano_jobs as vjobs

    live = port.get(vjobs.JOB_API_VERSION, "Job", job.name, job.team.slug)
    phase = (((live or {}).get("status") or {}).get("state") or {}).get("phase") or ""
    done = {"backend": "volcano", "kind": "Command", "name": f"{job.name}-abortjob",
            "action": vjobs.ABORT}
    if live is None or phase in _VOLCANO_STOPPED:
        return {**done, "skipped": phase or "gone"}
    port.issue_command(vjobs.render_command(
        job=live, action=vjobs.ABORT, reason="IdleGPUReclaim",
        message="idle GPUs reclaimed by platform staff"))
    return done


#: Backend name (``Cluster.backend``) -> ``(port, job) -> what was done``.
DEACTIVATORS: dict[str, Callable] = {
    Cluster.Backend.KUEUE: _kueue,
    Cluster.Backend.VOLCANO: _volcano,
}


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
    done = DEACTIVATORS[cluster.backend](port, job)
    audit_record(actor=None, action="job.deactivated", target=job, team=job.team,
                 before={"phase": job.phase}, after=done)
    return done
