"""The portal's models: clusters and flavors, teams, quota, jobs, usage, audit."""

from portal.models.audit import AuditEvent
from portal.models.clusters import Cluster, GpuFlavor, PriorityClass
from portal.models.fairness import FairnessSnapshot
from portal.models.jobs import Job
from portal.models.quota import QuotaGrant, QuotaRequest
from portal.models.reconcile import ManagedObject
from portal.models.teams import Cohort, Membership, Team
from portal.models.tokens import ApiToken
from portal.models.usage import IdleFlag, UsageSample

__all__ = [
    "ApiToken",
    "AuditEvent",
    "Cluster",
    "Cohort",
    "FairnessSnapshot",
    "GpuFlavor",
    "IdleFlag",
    "Job",
    "ManagedObject",
    "Membership",
    "PriorityClass",
    "QuotaGrant",
    "QuotaRequest",
    "Team",
    "UsageSample",
]
