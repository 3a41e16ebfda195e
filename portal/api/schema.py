"""OpenAPI schema hooks (drf-spectacular ``POSTPROCESSING_HOOKS``)."""

from portal.api.jobs import DEPRECATED_FIELDS


def mark_deprecated(result, generator, request, public):
    """Mark the job fields of :data:`portal.api.jobs.DEPRECATED_FIELDS` ``deprecated: true``
    wherever a component schema has them (the submit body and the job)."""
    for schema in (result.get("components") or {}).get("schemas", {}).values():
        for name, prop in (schema.get("properties") or {}).items():
            if name in DEPRECATED_FIELDS:
                prop["deprecated"] = True
    return result
