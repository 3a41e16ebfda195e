"""Services: every write of the product goes through a function here.

Named ``<entity>_<action>``, keyword-only; each validates before writing, writes
in one transaction, records an :class:`~portal.models.AuditEvent` and enqueues
Celery work with ``transaction.on_commit``. Errors: ``django.core.exceptions.
ValidationError`` with a dict naming the field, ``PermissionDenied`` for a role
that may not.
"""
