"""RabbitMQ virtual hosts as Kubernetes objects (``RabbitVhost.rabbitmq.orchard.dev``).

- identity: the vhost's name, which is also its id;
- adoption: a vhost with the same name;
- import filter: ``name``, ``description``, ``tag``, matched exactly;
- mutable through reconcilers: ``description``, ``tags``, ``tracing`` (``metadata``) and
  ``maxConnections``, ``maxQueues`` (``limits``, one optional sub-resource each); immutable:
  ``name``. Each change back is reported as a drift (old → new).

It talks to RabbitMQ's management API with ``requests`` through ``rabbitmq_client.Client`` (a
session from ``orchard_sdk.requests_transport.session()``, over wasi:http inside the component).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from orchard_sdk import (
    Actuator as Base,
    Description,
    Object,
    Resource,
    ResourceHandler,
    Shortcuts,
    Status,
    ensure,
    export,
    export_conversion,
    export_shortcuts,
    report,
)
from orchard_sdk.codec import camel
from orchard_sdk.schema import immutable, schema_of
from rabbitmq_client import Client


def schema(**constraints) -> dict:
    """A field's metadata: constraints for its schema (``orchard_sdk.schema``)."""
    return {"schema": constraints}


@dataclass
class VhostSpec:
    """``spec.resource``; its schema is derived from it (``describe``)."""

    name: str = field(metadata=schema(minLength=1, maxLength=255, **immutable("name")))
    description: str = field(default="", metadata=schema(maxLength=1024))
    tags: List[str] = field(default_factory=list, metadata=schema(
        maxItems=32, items={"maxLength": 64, "pattern": "^[^,]+$"}))
    tracing: bool = False
    max_connections: Optional[int] = field(default=None, metadata=schema(minimum=0))
    max_queues: Optional[int] = field(default=None, metadata=schema(minimum=0))


@dataclass
class VhostFilter:
    """``spec.import.filter``: at least one field."""

    __orchard_schema__ = {"minProperties": 1}

    name: Optional[str] = field(default=None, metadata=schema(maxLength=255))
    description: Optional[str] = field(default=None, metadata=schema(maxLength=1024))
    tag: Optional[str] = field(default=None, metadata=schema(maxLength=64))


@dataclass
class VhostState:
    """What the actuator remembers of a vhost."""

    name: str
    description: str = ""
    tags: List[str] = field(default_factory=list)
    tracing: bool = False
    #: RabbitMQ's limits, e.g. ``{"max-queues": 10}``.
    limits: Dict[str, int] = field(default_factory=dict)


METADATA = "metadata"
LIMITS = "limits"
#: spec field -> RabbitMQ limit name.
LIMIT_NAMES = {"max_connections": "max-connections", "max_queues": "max-queues"}


def state_of(v: dict, limits: Dict[str, int]) -> VhostState:
    tags = v.get("tags") or []
    if isinstance(tags, str):  # older RabbitMQ answers "a,b"
        tags = [t for t in tags.split(",") if t]
    return VhostState(
        name=v["name"],
        description=v.get("description") or "",
        tags=sorted(tags),
        tracing=bool(v.get("tracing", False)),
        limits=limits,
    )


def fetch(client: Client, name: str) -> Optional[Resource[VhostState]]:
    v = client.vhost(name)
    if v is None:
        return None
    return Resource(v["name"], state_of(v, client.vhost_limits(name)))


class Limit(ResourceHandler[int]):
    """One vhost limit: set when the spec gives it, removed when it does not."""

    def __init__(self, client: Client, vhost: VhostState, limit: str, desired: Optional[int]):
        self.client, self.vhost, self.name, self.desired = client, vhost, limit, desired

    def is_required(self) -> bool:
        return self.desired is not None

    def current(self) -> Optional[int]:
        return self.vhost.limits.get(self.name)

    def field(self) -> str:
        """The spec's name of the limit (``maxQueues`` for ``max-queues``)."""
        return camel(self.name.replace("-", "_"))

    def create(self) -> None:
        self.client.set_vhost_limit(self.vhost.name, self.name, self.desired)
        report.drift(self.field(), None, self.desired)

    def update(self, current: int) -> bool:
        if current == self.desired:
            return False
        self.client.set_vhost_limit(self.vhost.name, self.name, self.desired)
        report.drift(self.field(), current, self.desired)
        return True

    def delete(self, current: int) -> None:
        self.client.delete_vhost_limit(self.vhost.name, self.name)
        report.drift(self.field(), current, None)


class Vhost(Base):
    spec_type = VhostSpec
    filter_type = VhostFilter
    state_type = VhostState
    # RabbitMQ deletes a vhost before its DELETE answers, by its name alone, and answers 404
    # for one that is gone: the host reads it neither before nor after the delete. (Its
    # create is a PUT that creates or updates: it does not refuse duplicates.)
    shortcuts = Shortcuts(delete_is_synchronous=True, delete_by_id=True)

    def describe(self) -> Description:
        return Description(
            name="rabbitmq-vhost",
            group="rabbitmq.orchard.dev",
            version="v1alpha1",
            kind="RabbitVhost",
            plural="rabbitvhosts",
            # Derived from the dataclasses the SDK decodes (sdk/python/tests/test_schema.py holds
            # them to the schemas this plugin used to write by hand).
            resource_schema=schema_of(VhostSpec),
            filter_schema=schema_of(VhostFilter),
            observed_schema={
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "description": {"type": "string"},
                    "tags": {"type": "array", "items": {"type": "string"}},
                    "tracing": {"type": "boolean"},
                    "maxConnections": {"type": "integer"},
                    "maxQueues": {"type": "integer"},
                },
            },
            needs_credentials=True,
        )

    def get_by_id(self, obj: Object[VhostSpec], id: str) -> Optional[Resource[VhostState]]:
        return fetch(Client.for_object(obj), id)

    def list_for_adoption(self, obj: Object[VhostSpec]) -> Optional[List[Resource[VhostState]]]:
        if obj.spec is None:
            return None
        # The name is the vhost's identity: at most one can match.
        found = fetch(Client.for_object(obj), obj.spec.name)
        return [found] if found else []

    def list_for_import(self, obj: Object[VhostSpec], f: VhostFilter) -> List[Resource[VhostState]]:
        client = Client.for_object(obj)
        matches = [
            v for v in client.vhosts()
            if (f.name is None or v["name"] == f.name)
            and (f.description is None or (v.get("description") or "") == f.description)
            and (f.tag is None or f.tag in (v.get("tags") or []))
        ]
        return [Resource(v["name"], state_of(v, client.vhost_limits(v["name"]))) for v in matches]

    def create(self, obj: Object[VhostSpec]) -> Resource[VhostState]:
        spec = obj.require_spec()
        tags = sorted(spec.tags)
        # One request creates the vhost with its metadata: nothing fallible follows it (the
        # limits are set by their reconciler).
        Client.for_object(obj).put_vhost(spec.name, spec.description, tags, spec.tracing)
        return Resource(spec.name, VhostState(spec.name, spec.description, tags, spec.tracing, {}))

    def delete(self, obj: Object[VhostSpec], res: Resource[VhostState]) -> Status:
        return self.delete_by_id(obj, res.id)

    def delete_by_id(self, obj: Object[VhostSpec], id: str) -> Status:
        Client.for_object(obj).delete_vhost(id)
        return Status.done()

    def reconcilers(self, obj, res) -> List[str]:
        return [METADATA, LIMITS]

    def run_reconciler(self, name: str, obj: Object[VhostSpec], res: Resource[VhostState]) -> Status:
        spec = obj.require_spec()
        client = Client.for_object(obj)
        have = res.state
        if name == METADATA:
            diff = report.diff(
                {"description": have.description, "tags": sorted(have.tags), "tracing": have.tracing},
                {"description": spec.description, "tags": sorted(spec.tags), "tracing": spec.tracing},
                ["description", "tags", "tracing"],
            )
            if not diff:
                return Status.done()
            client.put_vhost(res.id, spec.description, sorted(spec.tags), spec.tracing)
            diff.report()  # once changed back: a failed update reports nothing
            return Status.needs_refresh("vhost metadata updated")
        if name == LIMITS:
            status = Status.done()
            for attr, limit in LIMIT_NAMES.items():
                status = status.and_(ensure(Limit(client, have, limit, getattr(spec, attr))))
            return status
        return super().run_reconciler(name, obj, res)

    def observed(self, res: Resource[VhostState]) -> dict:
        s = res.state
        out = {"name": s.name, "description": s.description, "tags": s.tags, "tracing": s.tracing}
        for attr, limit in LIMIT_NAMES.items():
            if limit in s.limits:
                out["maxConnections" if attr == "max_connections" else "maxQueues"] = s.limits[limit]
        return out


Actuator = export(Vhost)
# One API version (it lists none); the world that exports `Shortcuts` exports it too.
Conversion = export_conversion(Vhost)
Shortcuts = export_shortcuts(Vhost)
