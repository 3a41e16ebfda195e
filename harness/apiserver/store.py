"""The object store: Kubernetes API semantics without HTTP.

All served versions of a kind share one stored copy keyed by (group, plural,
namespace, name); objects are returned labelled with the version they were read
through, WITHOUT field conversion between versions (kueue v1beta1 and v1beta2
therefore see the same fields). Writes are validated against the schema of the
version they arrive through.

Thread-safe: one re-entrant lock serialises every operation.
"""

from __future__ import annotations

import copy
import datetime as dt
import json
import secrets
import string
import threading
import uuid
from dataclasses import dataclass
from typing import Any

from . import fields as f
from .errors import ApiError, already_exists, bad_request, conflict, not_found
from .patches import json_patch, merge_patch
from .registry import Registry, ResourceType
from .selectors import KIND_FIELDS, parse_field_selector, parse_label_selector
from .validation import prepare_object, prune_and_default

MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"
JSON_PATCH = "application/json-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"
PATCH_TYPES = (MERGE_PATCH, STRATEGIC_PATCH, JSON_PATCH, APPLY_PATCH)

_IDENTITY = ("name", "namespace", "uid", "creationTimestamp", "resourceVersion", "generation")


def _now() -> str:
    return dt.datetime.now(dt.UTC).replace(microsecond=0).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class _Entry:
    obj: dict[str, Any]  # stored without apiVersion/kind/managedFields
    owners: dict[f.OwnerKey, f.Owner]


class Store:
    """In-memory objects with resourceVersion, generation, ownership and validation.

    Methods take a ResourceType and return JSON-ready dicts (deep copies) labelled
    with that type's apiVersion and kind. Errors are raised as ApiError.
    """

    def __init__(self, registry: Registry) -> None:
        self.registry = registry
        self._lock = threading.RLock()
        self._objects: dict[tuple[str, str], dict[tuple[str, str], _Entry]] = {}
        self._rv = 0

    # ------------------------------------------------------------------ helpers

    @property
    def lock(self) -> threading.RLock:
        """The store's lock, for callers that need several operations atomically."""
        return self._lock

    def reset(self) -> None:
        """Delete every object (the resourceVersion counter keeps increasing)."""
        with self._lock:
            self._objects.clear()

    def resource_version(self) -> str:
        """The current global resourceVersion as a string."""
        with self._lock:
            return str(self._rv)

    def _bucket(self, rt: ResourceType) -> dict[tuple[str, str], _Entry]:
        return self._objects.setdefault(rt.storage_key, {})

    def _render(self, rt: ResourceType, entry: _Entry) -> dict[str, Any]:
        obj = copy.deepcopy(entry.obj)
        out = {"apiVersion": rt.api_version, "kind": rt.kind, **obj}
        managed = f.render_managed_fields(entry.owners)
        if managed:
            out["metadata"]["managedFields"] = managed
        return out

    def _key(self, rt: ResourceType, namespace: str | None, name: str) -> tuple[str, str]:
        if rt.namespaced and not namespace:
            raise bad_request(f"a namespace is required for {rt.plural}")
        return ((namespace or "") if rt.namespaced else "", name)

    def _require_namespace(self, rt: ResourceType, namespace: str | None) -> None:
        if not rt.namespaced:
            return
        ns_type = self.registry.lookup("", "v1", "namespaces")
        if not namespace or ns_type is None or ("", namespace) not in self._bucket(ns_type):
            raise not_found("namespaces", "", namespace or "")

    def _check_identity(self, rt: ResourceType, body: dict[str, Any], namespace: str | None,
                        name: str | None) -> None:
        if not isinstance(body, dict):
            raise bad_request("the request body must be an object")
        api_version, kind = body.get("apiVersion"), body.get("kind")
        if api_version and api_version != rt.api_version:
            group = api_version.rpartition("/")[0]
            if group != rt.group:
                raise bad_request(f"the API version in the data ({api_version}) does not match "
                                  f"the expected API version ({rt.api_version})")
        if kind and kind != rt.kind:
            raise bad_request(f"the kind in the data ({kind}) does not match the expected "
                              f"kind ({rt.kind})")
        meta = body.get("metadata") or {}
        if rt.namespaced and meta.get("namespace") and meta["namespace"] != namespace:
            raise bad_request("the namespace of the provided object does not match the "
                              "namespace sent on the request")
        if name is not None and meta.get("name") and meta["name"] != name:
            raise bad_request("the name of the object "
                              f"({meta['name']}) does not match the name on the URL ({name})")

    def _next_rv(self) -> str:
        self._rv += 1
        return str(self._rv)

    @staticmethod
    def _strip(body: dict[str, Any]) -> dict[str, Any]:
        obj = copy.deepcopy(body)
        obj.pop("apiVersion", None)
        obj.pop("kind", None)
        meta = obj.setdefault("metadata", {}) or {}
        obj["metadata"] = meta
        meta.pop("managedFields", None)
        return obj

    def _validate(self, rt: ResourceType, obj: dict[str, Any]) -> dict[str, Any]:
        full = {"apiVersion": rt.api_version, "kind": rt.kind, **obj}
        cleaned = prepare_object(full, rt)
        cleaned.pop("apiVersion", None)
        cleaned.pop("kind", None)
        return cleaned

    @staticmethod
    def _builtin_defaults(rt: ResourceType, obj: dict[str, Any]) -> None:
        if rt.group == "" and rt.kind == "Namespace":
            name = obj["metadata"].get("name", "")
            obj["metadata"].setdefault("labels", {})["kubernetes.io/metadata.name"] = name
            obj.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
            obj.setdefault("status", {}).setdefault("phase", "Active")

    # ------------------------------------------------------------------ reads

    def get(self, rt: ResourceType, namespace: str | None, name: str) -> dict[str, Any]:
        """The object, or ApiError(404)."""
        with self._lock:
            entry = self._bucket(rt).get(self._key(rt, namespace, name))
            if entry is None:
                raise not_found(rt.plural, rt.group, name)
            return self._render(rt, entry)

    def list(self, rt: ResourceType, namespace: str | None = None,
             label_selector: str | None = None,
             field_selector: str | None = None) -> dict[str, Any]:
        """A ``<Kind>List`` of matching objects; ``namespace=None`` lists all namespaces."""
        label_pred = parse_label_selector(label_selector)
        field_pred = parse_field_selector(field_selector, KIND_FIELDS.get(rt.storage_key, ()))
        with self._lock:
            items = []
            for (ns, _name), entry in sorted(self._bucket(rt).items()):
                if rt.namespaced and namespace and ns != namespace:
                    continue
                if label_pred(entry.obj) and field_pred(entry.obj):
                    items.append(self._render(rt, entry))
            return {
                "apiVersion": rt.api_version,
                "kind": rt.list_kind,
                "metadata": {"resourceVersion": str(self._rv)},
                "items": items,
            }

    # ------------------------------------------------------------------ writes

    def create(self, rt: ResourceType, namespace: str | None, body: dict[str, Any], *,
               manager: str, dry_run: bool = False) -> dict[str, Any]:
        """POST: create ``body``; ApiError 404 (namespace), 409 AlreadyExists, 422."""
        self._check_identity(rt, body, namespace, None)
        obj = self._strip(body)
        meta = obj["metadata"]
        if not meta.get("name") and meta.get("generateName"):
            suffix = "".join(secrets.choice(string.ascii_lowercase + string.digits)
                             for _ in range(5))
            meta["name"] = meta["generateName"] + suffix
        return self._create(rt, namespace, obj, manager=manager, apply_config=None,
                            dry_run=dry_run)

    def _create(self, rt: ResourceType, namespace: str | None, obj: dict[str, Any], *,
                manager: str, apply_config: dict[str, Any] | None,
                dry_run: bool) -> dict[str, Any]:
        with self._lock:
            meta = obj["metadata"]
            name = meta.get("name") or ""
            for k in _IDENTITY:
                if k not in ("name", "namespace"):
                    meta.pop(k, None)
            if rt.namespaced:
                meta["namespace"] = namespace
            else:
                meta.pop("namespace", None)
            if rt.has_status:
                obj.pop("status", None)
            self._builtin_defaults(rt, obj)
            obj = self._validate(rt, obj)
            self._require_namespace(rt, namespace)
            key = self._key(rt, namespace, name)
            if key in self._bucket(rt):
                raise already_exists(rt.plural, rt.group, name)
            now = _now()
            if apply_config is not None:
                owners = {}
                if apply_config:
                    owners[(manager, "Apply", "")] = f.Owner(
                        frozenset(f.leaf_paths(apply_config)), rt.api_version, now)
            else:
                owners = f.record_update({}, {}, self._view(rt, obj, ""), manager, "",
                                         rt.api_version, now)
            meta = obj["metadata"]
            meta["uid"] = str(uuid.uuid4())
            meta["creationTimestamp"] = now
            meta["generation"] = 1
            entry = _Entry(obj, owners)
            if dry_run:
                meta["resourceVersion"] = ""
                return self._render(rt, entry)
            meta["resourceVersion"] = self._next_rv()
            self._bucket(rt)[key] = entry
            return self._render(rt, entry)

    @staticmethod
    def _view(rt: ResourceType, obj: dict[str, Any], subresource: str) -> dict[str, Any]:
        return f.tracked_view(obj, status_subresource=rt.has_status, subresource=subresource)

    def _entry(self, rt: ResourceType, namespace: str | None, name: str) -> _Entry:
        entry = self._bucket(rt).get(self._key(rt, namespace, name))
        if entry is None:
            raise not_found(rt.plural, rt.group, name)
        return entry

    def _commit(self, rt: ResourceType, entry: _Entry, proposed: dict[str, Any],
                owners: dict[f.OwnerKey, f.Owner] | None, *, manager: str,
                subresource: str, dry_run: bool) -> dict[str, Any]:
        """Validate ``proposed`` and store it unless nothing changed."""
        old = entry.obj
        new = copy.deepcopy(proposed)
        new_meta = new.setdefault("metadata", {})
        for k in _IDENTITY:
            if k in old["metadata"]:
                new_meta[k] = old["metadata"][k]
            else:
                new_meta.pop(k, None)
        new_meta.pop("managedFields", None)
        if subresource == "status":
            status = new.get("status")
            new = copy.deepcopy(old)
            if status is None:
                new.pop("status", None)
            else:
                new["status"] = status
        elif rt.has_status:
            if "status" in old:
                new["status"] = copy.deepcopy(old["status"])
            else:
                new.pop("status", None)
        self._builtin_defaults(rt, new)
        new = self._validate(rt, new)
        now = _now()
        if owners is None:
            owners = f.record_update(entry.owners, self._view(rt, old, subresource),
                                     self._view(rt, new, subresource), manager, subresource,
                                     rt.api_version, now)
        same_owners = ({k: o.paths for k, o in owners.items()}
                       == {k: o.paths for k, o in entry.owners.items()})
        if new == old and same_owners:
            return self._render(rt, entry)
        if self._spec_changed(rt, old, new):
            new["metadata"]["generation"] = int(old["metadata"].get("generation", 1)) + 1
        updated = _Entry(new, owners)
        if dry_run:
            return self._render(rt, updated)
        if new != old or not same_owners:
            new["metadata"]["resourceVersion"] = self._next_rv()
        entry.obj, entry.owners = updated.obj, updated.owners
        return self._render(rt, entry)

    @staticmethod
    def _spec_changed(rt: ResourceType, old: dict[str, Any], new: dict[str, Any]) -> bool:
        skip = {"metadata", "status"} if rt.has_status else {"metadata"}
        return ({k: v for k, v in old.items() if k not in skip}
                != {k: v for k, v in new.items() if k not in skip})

    def replace(self, rt: ResourceType, namespace: str | None, name: str,
                body: dict[str, Any], *, manager: str, subresource: str = "",
                dry_run: bool = False) -> dict[str, Any]:
        """PUT. 409 Conflict if body.metadata.resourceVersion is set and stale."""
        self._check_identity(rt, body, namespace, name)
        with self._lock:
            entry = self._entry(rt, namespace, name)
            rv = (body.get("metadata") or {}).get("resourceVersion")
            if rv and rv != entry.obj["metadata"]["resourceVersion"]:
                raise conflict(rt.plural, rt.group, name, "the object has been modified; "
                               "please apply your changes to the latest version and try again")
            proposed = self._strip(body)
            return self._commit(rt, entry, proposed, None, manager=manager,
                                subresource=subresource, dry_run=dry_run)

    def patch(self, rt: ResourceType, namespace: str | None, name: str, patch: Any,
              patch_type: str, *, manager: str | None, subresource: str = "",
              force: bool = False, dry_run: bool = False) -> tuple[dict[str, Any], bool]:
        """PATCH in any of PATCH_TYPES. Returns (object, created).

        Server-side apply (APPLY_PATCH) requires ``manager`` and creates the object
        if absent (created=True). Raises ApiError 404/409/415/422.
        """
        if patch_type not in PATCH_TYPES:
            raise ApiError(415, f"the body of the request was in an unknown format - accepted "
                           f"media types include: {', '.join(PATCH_TYPES)}")
        with self._lock:
            if patch_type == APPLY_PATCH:
                return self._apply(rt, namespace, name, patch, manager=manager,
                                   subresource=subresource, force=force, dry_run=dry_run)
            entry = self._entry(rt, namespace, name)
            current = self._render(rt, entry)
            current["metadata"].pop("managedFields", None)
            if patch_type == JSON_PATCH:
                proposed = json_patch(current, patch)
            else:
                if not isinstance(patch, dict):
                    raise bad_request("merge patch must be a JSON object")
                proposed = merge_patch(current, patch)
            if not isinstance(proposed, dict):
                raise bad_request("patch result must be an object")
            rv = (patch.get("metadata") or {}).get("resourceVersion") if isinstance(
                patch, dict) else None
            if rv and rv != entry.obj["metadata"]["resourceVersion"]:
                raise conflict(rt.plural, rt.group, name, "the object has been modified; "
                               "please apply your changes to the latest version and try again")
            self._check_identity(rt, proposed, namespace, name)
            proposed = self._strip(proposed)
            return self._commit(rt, entry, proposed, None, manager=manager or "unknown",
                                subresource=subresource, dry_run=dry_run), False

    def _apply(self, rt: ResourceType, namespace: str | None, name: str, config: Any, *,
               manager: str | None, subresource: str, force: bool,
               dry_run: bool) -> tuple[dict[str, Any], bool]:
        if not manager:
            raise bad_request("PATCH with application/apply-patch+yaml requires the "
                              "fieldManager query parameter")
        if not isinstance(config, dict):
            raise bad_request("apply configuration must be an object")
        if not config.get("apiVersion") or not config.get("kind"):
            raise bad_request("apply configuration must set apiVersion and kind")
        self._check_identity(rt, config, namespace, name)
        config = self._strip(config)
        config["metadata"]["name"] = name
        if rt.schema:  # own only what survives pruning; defaults are nobody's
            full = {"apiVersion": rt.api_version, "kind": rt.kind, **config}
            config = prune_and_default(full, rt.schema, root=True, apply_defaults=False)
            config.pop("apiVersion", None)
            config.pop("kind", None)
        view = self._view(rt, config, subresource)
        key = self._key(rt, namespace, name)
        entry = self._bucket(rt).get(key)
        if entry is None:
            if subresource:
                raise not_found(rt.plural, rt.group, name)
            return self._create(rt, namespace, config, manager=manager, apply_config=view,
                                dry_run=dry_run), True
        rv = config["metadata"].get("resourceVersion")
        if rv and rv != entry.obj["metadata"]["resourceVersion"]:
            raise conflict(rt.plural, rt.group, name, "the object has been modified; "
                           "please apply your changes to the latest version and try again")
        current_view = self._view(rt, entry.obj, subresource)
        merged_view, owners = f.server_side_apply(
            current_view, view, entry.owners, manager=manager, force=force,
            subresource=subresource, api_version=rt.api_version, now=_now())
        proposed = copy.deepcopy(entry.obj)
        if subresource == "status":
            proposed["status"] = merged_view.get("status", {})
        else:
            meta = proposed["metadata"]
            for k in f._TRACKED_METADATA:
                meta.pop(k, None)
            meta.update(merged_view.pop("metadata", {}))
            for k in list(proposed):
                if k not in ("metadata", "apiVersion", "kind") and not (
                        k == "status" and rt.has_status):
                    del proposed[k]
            proposed.update(merged_view)
        return self._commit(rt, entry, proposed, owners, manager=manager,
                            subresource=subresource, dry_run=dry_run), False

    def delete(self, rt: ResourceType, namespace: str | None, name: str, *,
               dry_run: bool = False) -> dict[str, Any]:
        """DELETE; returns a Success Status. Deleting a Namespace deletes its contents."""
        with self._lock:
            key = self._key(rt, namespace, name)
            entry = self._bucket(rt).get(key)
            if entry is None:
                raise not_found(rt.plural, rt.group, name)
            if not dry_run:
                del self._bucket(rt)[key]
                self._next_rv()
                if rt.group == "" and rt.plural == "namespaces":
                    self._delete_namespace_contents(name)
            return {
                "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                "details": {"name": name, "group": rt.group, "kind": rt.plural,
                            "uid": entry.obj["metadata"]["uid"]},
            }

    def _delete_namespace_contents(self, namespace: str) -> None:
        for (group, plural), bucket in self._objects.items():
            if group == "" and plural == "namespaces":
                continue
            for key in [k for k in bucket if k[0] == namespace]:
                del bucket[key]

    def delete_collection(self, rt: ResourceType, namespace: str | None,
                          label_selector: str | None = None,
                          field_selector: str | None = None) -> dict[str, Any]:
        """DELETE on a collection; returns the ``<Kind>List`` of deleted objects."""
        with self._lock:
            listing = self.list(rt, namespace, label_selector, field_selector)
            for item in listing["items"]:
                meta = item["metadata"]
                self.delete(rt, meta.get("namespace"), meta["name"])
            listing["metadata"]["resourceVersion"] = str(self._rv)
            return listing

    def snapshot(self) -> str:
        """A JSON dump of every stored object (for debugging failed tests)."""
        with self._lock:
            dump = {f"{g}/{p}": {f"{ns}/{n}": e.obj for (ns, n), e in bucket.items()}
                    for (g, p), bucket in self._objects.items()}
            return json.dumps(dump, indent=1, sort_keys=True)
