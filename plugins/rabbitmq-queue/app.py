"""RabbitMQ queues as Kubernetes objects (``RabbitQueue.rabbitmq.orchard.dev``).

A queue lives in a virtual host: ``spec.resource.vhostRef`` names a ``RabbitVhost`` object, a
guarded dependency (the vhost cannot be deleted while queues use it).

- identity: ``<vhost>/<name>``, both percent-encoded (``%2F/orders`` for vhost ``/``);
- adoption: the queue with the same vhost and name;
- import filter: ``vhost`` (required), ``name``, ``type``, ``durable``, matched exactly;
- immutable (RabbitMQ cannot change them): ``name``, ``type``, ``durable``, ``autoDelete``,
  ``arguments``; mutable through reconcilers: ``bindings`` (to exchanges of the vhost) and
  ``maxLength`` / ``messageTtl`` (``policy``: a policy ``orchard.queue.<name>`` matching only
  this queue, an optional sub-resource).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from orchard_sdk import (
    Actuator as Base,
    DependencyDecl,
    Description,
    InvalidConfiguration,
    Object,
    Resource,
    ResourceHandler,
    Status,
    ensure,
    export,
)
from orchard_sdk.http import quote
from orchard_sdk.schema import immutable, schema_of
from urllib.parse import unquote
from rabbitmq_client import Client


def schema(**constraints) -> dict:
    """A field's metadata: constraints for its schema (``orchard_sdk.schema``)."""
    return {"schema": constraints}


QUEUE_TYPES = ["classic", "quorum", "stream"]


@dataclass
class Binding:
    """A binding of the queue to an exchange of its vhost."""

    exchange: str = field(metadata=schema(minLength=1, maxLength=255))
    routing_key: str = field(default="", metadata=schema(maxLength=255))


@dataclass
class QueueSpec:
    """``spec.resource``; its schema is derived from it (``describe``). The defaults in the
    schema are the dataclass's, written again: the apiserver applies them."""

    vhost_ref: str = field(metadata=schema(maxLength=253, **immutable("vhostRef")))
    name: str = field(metadata=schema(minLength=1, maxLength=255, **immutable("name")))
    queue_type: str = field(default="classic", metadata={"json": "type", "schema": {
        "enum": QUEUE_TYPES, "default": "classic", **immutable("type")}})
    durable: bool = field(default=True, metadata=schema(default=True, **immutable("durable")))
    auto_delete: bool = field(default=False, metadata=schema(default=False, **immutable("autoDelete")))
    arguments: Dict[str, Any] = field(default_factory=dict, metadata=schema(**immutable("arguments")))
    bindings: List[Binding] = field(default_factory=list, metadata=schema(maxItems=64))
    max_length: Optional[int] = field(default=None, metadata=schema(minimum=0))
    message_ttl: Optional[int] = field(default=None, metadata=schema(minimum=0))


@dataclass
class QueueFilter:
    """``spec.import.filter``."""

    vhost: str = field(metadata=schema(maxLength=255))
    name: Optional[str] = field(default=None, metadata=schema(maxLength=255))
    queue_type: Optional[str] = field(default=None, metadata={"json": "type", "schema": {"enum": QUEUE_TYPES}})
    durable: Optional[bool] = None


@dataclass
class BoundTo:
    exchange: str
    routing_key: str
    properties_key: str


@dataclass
class QueueState:
    """What the actuator remembers of a queue."""

    vhost: str
    name: str
    queue_type: str = field(default="classic", metadata={"json": "type"})
    durable: bool = True
    auto_delete: bool = False
    arguments: Dict[str, Any] = field(default_factory=dict)
    bindings: List[BoundTo] = field(default_factory=list)
    #: Definition of the policy ``orchard.queue.<name>``; ``None`` when there is none.
    policy: Optional[Dict[str, Any]] = None


BINDINGS = "bindings"
POLICY = "policy"
#: spec field -> policy definition key.
POLICY_KEYS = {"max_length": "max-length", "message_ttl": "message-ttl"}


def queue_id(vhost: str, name: str) -> str:
    return f"{quote(vhost)}/{quote(name)}"


def parse_id(id: str) -> Tuple[str, str]:
    parts = id.split("/")
    if len(parts) != 2 or not parts[0] or not parts[1]:
        raise InvalidConfiguration(f"queue id {id!r} is not <vhost>/<name> (percent-encoded)")
    return unquote(parts[0]), unquote(parts[1])


def policy_name(queue: str) -> str:
    return f"orchard.queue.{queue}"


def fetch(client: Client, vhost: str, name: str, q: Optional[dict] = None) -> Optional[Resource[QueueState]]:
    q = q or client.queue(vhost, name)
    if q is None:
        return None
    bindings = [
        BoundTo(b["source"], b.get("routing_key", ""), b.get("properties_key", ""))
        for b in client.queue_bindings(vhost, name)
    ]
    policy = client.policy(vhost, policy_name(name))
    return Resource(
        queue_id(vhost, name),
        QueueState(
            vhost=vhost,
            name=name,
            queue_type=q.get("type", "classic"),
            durable=bool(q.get("durable", True)),
            auto_delete=bool(q.get("auto_delete", False)),
            arguments={k: v for k, v in (q.get("arguments") or {}).items() if k != "x-queue-type"},
            bindings=sorted(bindings, key=lambda b: (b.exchange, b.routing_key)),
            policy=None if policy is None else dict(policy.get("definition") or {}),
        ),
    )


class Policy(ResourceHandler[Dict[str, Any]]):
    """The queue's own policy, for the limits a queue cannot change after declaration."""

    name = "policy"

    def __init__(self, client: Client, state: QueueState, desired: Dict[str, Any]):
        self.client, self.state, self.desired = client, state, desired

    def is_required(self) -> bool:
        return bool(self.desired)

    def current(self) -> Optional[Dict[str, Any]]:
        return self.state.policy

    def create(self) -> None:
        self.client.put_policy(self.state.vhost, policy_name(self.state.name), {
            "pattern": f"^{re.escape(self.state.name)}$",
            "apply-to": "queues",
            "priority": 100,
            "definition": self.desired,
        })

    def update(self, current: Dict[str, Any]) -> bool:
        if current == self.desired:
            return False
        self.create()
        return True

    def delete(self, current: Dict[str, Any]) -> None:
        self.client.delete_policy(self.state.vhost, policy_name(self.state.name))


class Queue(Base):
    spec_type = QueueSpec
    filter_type = QueueFilter
    state_type = QueueState

    def describe(self) -> Description:
        return Description(
            name="rabbitmq-queue",
            group="rabbitmq.orchard.dev",
            version="v1alpha1",
            kind="RabbitQueue",
            plural="rabbitqueues",
            # Derived from the dataclasses the SDK decodes (sdk/python/tests/test_schema.py holds
            # them to the schemas this plugin used to write by hand).
            resource_schema=schema_of(QueueSpec),
            filter_schema=schema_of(QueueFilter),
            observed_schema={
                "type": "object",
                "properties": {
                    "vhost": {"type": "string"},
                    "name": {"type": "string"},
                    "type": {"type": "string"},
                    "durable": {"type": "boolean"},
                    "autoDelete": {"type": "boolean"},
                    "arguments": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                    "bindings": {"type": "array", "items": {"type": "object", "properties": {
                        "exchange": {"type": "string"}, "routingKey": {"type": "string"}}}},
                    "maxLength": {"type": "integer"},
                    "messageTtl": {"type": "integer"},
                },
            },
            dependencies=[DependencyDecl.guarded("vhost", "vhostRef", "RabbitVhost")],
            needs_credentials=True,
        )

    def get_by_id(self, obj: Object[QueueSpec], id: str) -> Optional[Resource[QueueState]]:
        vhost, name = parse_id(id)
        return fetch(Client.for_object(obj), vhost, name)

    def list_for_adoption(self, obj: Object[QueueSpec]) -> Optional[List[Resource[QueueState]]]:
        if obj.spec is None:
            return None
        found = fetch(Client.for_object(obj), obj.dependency_id("vhost"), obj.spec.name)
        return [found] if found else []

    def list_for_import(self, obj: Object[QueueSpec], f: QueueFilter) -> List[Resource[QueueState]]:
        client = Client.for_object(obj)
        matches = [
            q for q in client.queues(f.vhost)
            if (f.name is None or q["name"] == f.name)
            and (f.queue_type is None or q.get("type") == f.queue_type)
            and (f.durable is None or q.get("durable") == f.durable)
        ]
        return [r for q in matches if (r := fetch(client, f.vhost, q["name"], q)) is not None]

    def create(self, obj: Object[QueueSpec]) -> Resource[QueueState]:
        spec = obj.require_spec()
        vhost = obj.dependency_id("vhost")
        arguments = {**spec.arguments, "x-queue-type": spec.queue_type}
        # One declaration creates the queue with every immutable property: nothing fallible
        # follows it (bindings and the policy have their reconcilers).
        Client.for_object(obj).put_queue(vhost, spec.name, {
            "durable": spec.durable, "auto_delete": spec.auto_delete, "arguments": arguments,
        })
        return Resource(queue_id(vhost, spec.name), QueueState(
            vhost, spec.name, spec.queue_type, spec.durable, spec.auto_delete, dict(spec.arguments),
        ))

    def delete(self, obj: Object[QueueSpec], res: Resource[QueueState]) -> Status:
        client = Client.for_object(obj)
        s = res.state
        if client.vhost(s.vhost) is None:
            return Status.done()  # the vhost, and so the queue, is gone
        client.delete_policy(s.vhost, policy_name(s.name))
        client.delete_queue(s.vhost, s.name)
        return Status.done()

    def reconcilers(self, obj, res) -> List[str]:
        return [BINDINGS, POLICY]

    def run_reconciler(self, name: str, obj: Object[QueueSpec], res: Resource[QueueState]) -> Status:
        spec = obj.require_spec()
        client = Client.for_object(obj)
        s = res.state
        if name == BINDINGS:
            want = {(b.exchange, b.routing_key) for b in spec.bindings}
            have = {(b.exchange, b.routing_key): b for b in s.bindings}
            changed = False
            for exchange, key in sorted(want - have.keys()):
                client.bind(s.vhost, exchange, s.name, key)
                changed = True
            for k in sorted(have.keys() - want):
                client.unbind(s.vhost, k[0], s.name, have[k].properties_key)
                changed = True
            return Status.needs_refresh("bindings updated") if changed else Status.done()
        if name == POLICY:
            desired = {
                key: getattr(spec, attr) for attr, key in POLICY_KEYS.items()
                if getattr(spec, attr) is not None
            }
            return ensure(Policy(client, s, desired))
        return super().run_reconciler(name, obj, res)

    def observed(self, res: Resource[QueueState]) -> dict:
        # The queue's configuration only: live counters (``messages``, which RabbitMQ fills in
        # a stats round after the queue appears) would change status.observed between two passes
        # that changed nothing, failing reconcile-idempotent and costing a status write per resync.
        s = res.state
        out: Dict[str, Any] = {
            "vhost": s.vhost, "name": s.name, "type": s.queue_type, "durable": s.durable,
            "autoDelete": s.auto_delete, "arguments": s.arguments,
            "bindings": [{"exchange": b.exchange, "routingKey": b.routing_key} for b in s.bindings],
        }
        for attr, key in POLICY_KEYS.items():
            if s.policy and key in s.policy:
                out["maxLength" if attr == "max_length" else "messageTtl"] = s.policy[key]
        return out


Actuator = export(Queue)
