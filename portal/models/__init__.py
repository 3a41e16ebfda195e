"""The portal's models: clusters and flavors, teams, quota, jobs, audit."""

from portal.models.audit import AuditEvent
from portal.models.clusters import Cluster, GpuFlavor, PriorityClass
from portal.models.jobs import Job
from portal.models.quota import QuotaGrant, QuotaRequest
from portal.models.reconcile import ManagedObject
from portal.models.teams import Cohort, Membership, Team

__all__ = [
    "AuditEvent",
    "Cluster",
    "Cohort",
    "GpuFlavor",
    "Job",
    "ManagedObject",
    "Membership",
    "PriorityClass",
    "QuotaGrant",
    "QuotaRequest",
    "Team",
]
