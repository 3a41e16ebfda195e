"""OpenAPI post-processing: what every operation may answer that views do not declare."""

THROTTLED = {
    "description": "Throttled: too many requests from this user (or, unauthenticated, from "
                   "this client IP, failed authentications included). Retry after the "
                   "Retry-After seconds.",
    "headers": {"Retry-After": {"schema": {"type": "integer", "minimum": 1},
                                "description": "seconds to wait before trying again"}},
    "content": {"application/json": {"schema": {
        "type": "object", "properties": {"detail": {"type": "string"}},
        "required": ["detail"]}}},
}


def add_throttled_responses(result, generator, **kwargs):
    """A 429 response on every operation (the API's throttles, :mod:`portal.api.throttles`)."""
    for path in result.get("paths", {}).values():
        for operation in path.values():
            if isinstance(operation, dict) and "responses" in operation:
                operation["responses"].setdefault("429", THROTTLED)
    return result
