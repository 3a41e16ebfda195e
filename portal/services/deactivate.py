"""Deactivate a job on its cluster without deleting it: one dispatch per scheduler backend.

* Kueue: merge-patch ``spec.active: false`` on the job's Workload
  (``KubernetesCluster.deactivate_workload``, from the ``jobs-queues`` branch); Kueue then
  evicts it and its pods stop, while the Job and the Workload stay.
* Volcano: create a ``bus.volcano.sh/v1alpha1`` ``Command`` with action ``AbortJob``
  targeting the vcjob (rendered by ``queues.render.volcano.abort_job_command`` from the
  ``volcano`` branch, created with ``KubernetesCluster.create``); Volcano aborts the job
  (pods removed, job kept in ``Aborted``).

Used by idle-GPU reclaim (``portal.job_deactivate``); idempotent (a Workload already
inactive is patched to the same value; an abort Command has a deterministic name, and an
"already exists" answer counts as done).
"""

from __future__ import annotations

from collections.abc import Callable

from portal.models import Cluster, Job
from portal.services.audit import audit_record
from portal.services.reconcile import cluster_port
from queues.errors import PermanentError, TransientError


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


def _volcano(port, job: Job) -> dict:
    from queues.render.volcano import abort_job_command  # from the volcano branch

    command = abort_job_command(namespace=job.team.slug, job_name=job.name,
                                reason="IdleGPUReclaim")
    try:
        port.create(command)
    except TransientError as exc:
        if getattr(exc, "reason", "") != "AlreadyExists":
            raise
    return {"backend": "volcano", "kind": "Command", "name": command["metadata"]["name"],
            "action": "AbortJob"}


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
