"""The portal's models: clusters and flavors, teams, quota, audit."""

from portal.models.audit import AuditEvent
from portal.models.clusters import Cluster, GpuFlavor, PriorityClass
from portal.models.quota import QuotaGrant, QuotaRequest
from portal.models.reconcile import ManagedObject
from portal.models.teams import Cohort, Membership, Team

__all__ = [
    "AuditEvent",
    "Cluster",
    "Cohort",
    "GpuFlavor",
    "ManagedObject",
    "Membership",
    "PriorityClass",
    "QuotaGrant",
    "QuotaRequest",
    "Team",
]
