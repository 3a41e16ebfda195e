"""Validation, pruning and defaulting of objects written to the emulator.

* CRD kinds: the served version's ``openAPIV3Schema`` checked with jsonschema
  after converting the OpenAPI dialect (``nullable``, ``x-kubernetes-int-or-string``).
  Unknown fields are pruned silently (as a real server does without strict field
  validation) unless ``x-kubernetes-preserve-unknown-fields`` is set; ``null``
  values of non-nullable fields are dropped; ``default`` values are applied.
  CEL rules (``x-kubernetes-validations``) are NOT evaluated.
* Built-in kinds: the upstream JSON schemas shipped by ``kubernetes_validate``.
* ``metadata``: name (DNS-1123 subdomain; label for Namespaces), labels.
"""

from __future__ import annotations

import copy
import functools
import re
from typing import Any

import jsonschema
from kubernetes_validate import utils as kv_utils
from referencing import Registry as RefRegistry
from referencing import Resource

from .errors import ApiError, invalid
from .registry import ResourceType

_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS1123_SUBDOMAIN = re.compile(
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
)
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")

SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, "
    "'-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', "
    "regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
    "and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', "
    "regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)


def format_path(path: list[Any] | tuple[Any, ...]) -> str:
    """``["spec", "groups", 0, "name"]`` -> ``spec.groups[0].name``."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def _cause(field: str, message: str, reason: str = "FieldValueInvalid") -> dict[str, str]:
    return {"reason": reason, "message": message, "field": field}


# --------------------------------------------------------------------------- metadata

def metadata_causes(obj: dict[str, Any], rt: ResourceType) -> list[dict[str, str]]:
    """Causes for an invalid name, namespace or labels (empty list if valid)."""
    meta = obj.get("metadata") or {}
    causes = []
    name = meta.get("name")
    if not name:
        causes.append(_cause("metadata.name", "Required value: name or generateName is required",
                             "FieldValueRequired"))
    else:
        if rt.kind == "Namespace":
            ok, msg, limit = _DNS1123_LABEL.match(name), LABEL_MSG, 63
        else:
            ok, msg, limit = _DNS1123_SUBDOMAIN.match(name), SUBDOMAIN_MSG, 253
        if not ok:
            causes.append(_cause("metadata.name", f'Invalid value: "{name}": {msg}'))
        elif len(name) > limit:
            causes.append(_cause(
                "metadata.name", f'Invalid value: "{name}": must be no more than {limit} characters'
            ))
    for key, value in (meta.get("labels") or {}).items():
        field = "metadata.labels"
        if not _valid_qualified_name(key):
            causes.append(_cause(field, f'Invalid value: "{key}": name part must consist of '
                                 "alphanumeric characters, '-', '_' or '.', and must start and "
                                 "end with an alphanumeric character"))
        if not isinstance(value, str) or len(value) > 63 or not _LABEL_VALUE.match(value):
            causes.append(_cause(field, f'Invalid value: "{value}": a valid label must be an '
                                 "empty string or consist of alphanumeric characters, '-', '_' "
                                 "or '.', and must start and end with an alphanumeric "
                                 "character, at most 63 characters"))
    return causes


def _valid_qualified_name(key: str) -> bool:
    prefix, _, name = key.rpartition("/")
    if prefix and (len(prefix) > 253 or not _DNS1123_SUBDOMAIN.match(prefix)):
        return False
    return bool(name) and len(name) <= 63 and bool(_QUALIFIED_NAME.match(name))


# --------------------------------------------------------------------------- CRD schemas

def to_json_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """Convert an OpenAPI v3 structural schema into a jsonschema-checkable one."""
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key in ("properties", "patternProperties"):
            out[key] = {k: to_json_schema(v) for k, v in value.items()}
        elif key in ("items", "additionalProperties", "not"):
            out[key] = to_json_schema(value) if isinstance(value, dict) else value
        elif key in ("allOf", "anyOf", "oneOf"):
            out[key] = [to_json_schema(v) for v in value]
        elif key in ("description", "x-kubernetes-validations", "example", "externalDocs"):
            continue
        elif key == "format":
            continue  # int32/int64/date-time: not enforced (the real server is lenient too)
        else:
            out[key] = value
    if schema.get("x-kubernetes-int-or-string") and "type" not in out and "anyOf" not in out:
        out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    if schema.get("nullable") and "type" in out:
        types = out["type"] if isinstance(out["type"], list) else [out["type"]]
        out["type"] = [*types, "null"]
    return out


@functools.lru_cache(maxsize=512)
def _crd_validator(rt: ResourceType) -> jsonschema.protocols.Validator:
    schema = to_json_schema(copy.deepcopy(rt.schema or {}))
    # metadata is validated by metadata_causes(); the CRD schema rarely says more.
    schema.get("properties", {}).pop("metadata", None)
    return jsonschema.Draft7Validator(schema)


def prune_and_default(value: Any, schema: dict[str, Any] | None, *, root: bool = False,
                      apply_defaults: bool = True) -> Any:
    """Return ``value`` with unknown fields dropped, nulls dropped, defaults applied.

    ``schema`` is the (OpenAPI) structural schema of ``value``; ``root`` keeps
    apiVersion/kind/metadata at the top level; ``apply_defaults=False`` only prunes.
    """
    if not isinstance(schema, dict):
        return value
    if isinstance(value, dict):
        if schema.get("x-kubernetes-preserve-unknown-fields") and not schema.get("properties"):
            return value
        props = _properties(schema)
        additional = schema.get("additionalProperties")
        out = {}
        for key, item in value.items():
            if root and key in ("apiVersion", "kind", "metadata"):
                out[key] = item
                continue
            if key in props:
                sub = props[key]
            elif isinstance(additional, dict):
                sub = additional
            elif additional is True or schema.get("x-kubernetes-preserve-unknown-fields"):
                out[key] = item
                continue
            else:
                continue  # pruned
            if item is None and not sub.get("nullable"):
                continue
            out[key] = prune_and_default(item, sub, apply_defaults=apply_defaults)
        if not apply_defaults:
            return out
        for key, sub in props.items():
            if key not in out and "default" in sub and not (root and key == "metadata"):
                out[key] = prune_and_default(copy.deepcopy(sub["default"]), sub)
        return out
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [prune_and_default(v, schema["items"], apply_defaults=apply_defaults)
                for v in value]
    return value


def _properties(schema: dict[str, Any]) -> dict[str, Any]:
    props = dict(schema.get("properties") or {})
    for key in ("allOf", "anyOf", "oneOf"):
        for branch in schema.get(key) or []:
            for name, sub in (branch.get("properties") or {}).items():
                props.setdefault(name, sub)
    return props


def _schema_causes(errors: list[jsonschema.ValidationError]) -> list[dict[str, str]]:
    causes = []
    for err in errors:
        path = list(err.absolute_path)
        if err.validator == "required":
            missing = [k for k in err.validator_value
                       if isinstance(err.instance, dict) and k not in err.instance]
            for key in missing:
                causes.append(_cause(format_path([*path, key]), "Required value",
                                     "FieldValueRequired"))
            continue
        field = format_path(path) or "<root>"
        shown = err.instance if not isinstance(err.instance, (dict, list)) else "object"
        if err.validator == "type":
            causes.append(_cause(field, f'Invalid value: "{shown}": {field} in body must be of '
                                 f"type {err.validator_value}", "FieldValueTypeInvalid"))
        elif err.validator == "enum":
            causes.append(_cause(field, f'Unsupported value: "{shown}": supported values: '
                                 f"{err.validator_value}", "FieldValueNotSupported"))
        elif err.validator == "pattern":
            causes.append(_cause(field, f'Invalid value: "{shown}": {field} in body should match '
                                 f"'{err.validator_value}'"))
        else:
            causes.append(_cause(field, f'Invalid value: "{shown}": {err.message}'))
    return causes


def prepare_crd_object(obj: dict[str, Any], rt: ResourceType) -> dict[str, Any]:
    """Prune/default ``obj`` by ``rt.schema`` and validate it.

    Returns the cleaned object; raises ApiError(422) naming the fields.
    """
    cleaned = prune_and_default(obj, rt.schema, root=True) if rt.schema else obj
    causes = metadata_causes(cleaned, rt)
    if rt.schema:
        errors = sorted(_crd_validator(rt).iter_errors(cleaned), key=lambda e: list(e.path))
        causes += _schema_causes(errors)
    if causes:
        raise invalid(rt.kind, rt.group, (cleaned.get("metadata") or {}).get("name", ""), causes)
    return cleaned


# --------------------------------------------------------------------------- built-in kinds

@functools.lru_cache(maxsize=64)
def _builtin_validator(kind: str, api_version: str) -> jsonschema.protocols.Validator | None:
    version = kv_utils.latest_version()
    schema_dir = f"kubernetes-json-schema/v{version}-local"
    short_gv = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
    try:
        schema = kv_utils.schema_contents(f"{schema_dir}/{kind.lower()}-{short_gv}.json", version)
    except FileNotFoundError:
        return None
    defs = kv_utils.schema_contents(f"{schema_dir}/_definitions.json", version)
    registry = Resource.from_contents(schema) @ RefRegistry()
    registry = Resource.from_contents(defs) @ registry
    return jsonschema.Draft202012Validator(schema, registry=registry)


def prepare_builtin_object(obj: dict[str, Any], rt: ResourceType) -> dict[str, Any]:
    """Validate a built-in kind with kubernetes_validate's upstream schemas.

    Returns ``obj`` (built-in kinds are neither pruned nor defaulted, except the
    few defaults the store sets); raises ApiError(422).
    """
    causes = metadata_causes(obj, rt)
    validator = _builtin_validator(rt.kind, rt.api_version)
    if validator is not None:
        errors = sorted(validator.iter_errors(obj), key=lambda e: list(e.path))
        causes += _schema_causes(errors)
    if causes:
        raise invalid(rt.kind, rt.group, (obj.get("metadata") or {}).get("name", ""), causes)
    return obj


def prepare_object(obj: dict[str, Any], rt: ResourceType) -> dict[str, Any]:
    """Validate (and for CRDs prune/default) ``obj``; raises ApiError(422)."""
    if not isinstance(obj, dict):
        raise ApiError(400, "the request body must be a JSON object", reason="BadRequest")
    if rt.schema is not None:
        return prepare_crd_object(obj, rt)
    return prepare_builtin_object(obj, rt)
