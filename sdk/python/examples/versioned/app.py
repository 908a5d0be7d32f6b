"""An example of a kind with two API versions and the conversion between them (not a plugin to
deploy: it manages nothing). ``Upstream.examples.orchard.dev``, as in the JavaScript SDK's
example (sdk/js/examples/versioned):

- v1alpha1: ``spec.resource: {name, hosts: [string]}``, ``status.resource: {hosts: [string]}``;
- v1beta1, the storage version and the one this code works at (``describe().version``):
  ``spec.resource: {name, servers: [{host, weight?}]}``, ``status.resource: {servers: [{host}]}``.

A round trip loses nothing: at v1alpha1 the weights, which it cannot hold, wait in the
annotation ``examples.orchard.dev/v1beta1-server-weights`` (JSON, host -> weight) and come back
from it at v1beta1. ``status.resource`` needs no annotation: it has no weights.

    sdk/python/build.sh sdk/python/examples/versioned upstream.wasm
    orchard invoke upstream.wasm convert --to v1beta1 --object sdk/python/examples/versioned/upstream-v1alpha1.yaml

Unit tests: sdk/python/tests/test_versioned_example.py; as a component:
sdk/python/tests/component.sh.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any, Dict, List, Optional

from orchard_sdk import (
    Actuator,
    ApiVersion,
    Convertible,
    Description,
    InvalidConfiguration,
    Object,
    Unrecoverable,
    export,
    export_conversion,
)
from orchard_sdk.schema import schema_of

GROUP = "examples.orchard.dev"
WEIGHTS = f"{GROUP}/v1beta1-server-weights"

_HOST = {"minLength": 1, "maxLength": 253}


# -- v1beta1: the version the code works at (spec_type) -----------------------------------------


@dataclass
class Server:
    host: str = field(metadata={"schema": _HOST})
    weight: Optional[int] = field(default=None, metadata={"schema": {"minimum": 0, "maximum": 1000}})


@dataclass
class UpstreamSpec:
    name: str = field(metadata={"schema": {"minLength": 1, "maxLength": 253}})
    servers: List[Server] = field(
        default_factory=list,
        metadata={
            "schema": {
                "maxItems": 32,
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["host"],
            }
        },
    )


@dataclass
class ObservedServer:
    host: Optional[str] = None


@dataclass
class Observed:
    servers: List[ObservedServer] = field(default_factory=list)


@dataclass
class Filter:
    # An import filter names something: an empty one would match everything.
    __orchard_schema__ = {"minProperties": 1}

    name: Optional[str] = field(default=None, metadata={"schema": {"minLength": 1, "maxLength": 253}})


# -- v1alpha1: its schemas only; the apiserver converts its objects through `convert` -----------


@dataclass
class UpstreamSpecV1alpha1:
    name: str = field(metadata={"schema": {"minLength": 1, "maxLength": 253}})
    hosts: List[str] = field(
        default_factory=list,
        metadata={"schema": {"maxItems": 32, "items": _HOST, "x-kubernetes-list-type": "set"}},
    )


@dataclass
class ObservedV1alpha1:
    hosts: List[str] = field(default_factory=list)


V1ALPHA1 = ApiVersion(
    name="v1alpha1",
    resource_schema=schema_of(UpstreamSpecV1alpha1),
    observed_schema=schema_of(ObservedV1alpha1),
    filter_schema=schema_of(Filter),
    storage=False,
)


# -- the conversion ----------------------------------------------------------------------------


def _weights_of(annotations: Dict[str, str]) -> Dict[str, int]:
    """The weights kept in the annotations (``{}`` without it)."""
    text = annotations.get(WEIGHTS)
    if text is None:
        return {}
    try:
        weights = json.loads(text)
    except ValueError as e:
        raise InvalidConfiguration(f"annotation {WEIGHTS} is not JSON: {e}") from None
    if not isinstance(weights, dict) or not all(
        isinstance(w, int) and not isinstance(w, bool) for w in weights.values()
    ):
        raise InvalidConfiguration(f"annotation {WEIGHTS} is not a JSON map of host to weight: {text}")
    return weights


def _keep_weights(annotations: Dict[str, str], weights: Dict[str, int]) -> None:
    # Sorted keys: the same weights always give the same annotation.
    if weights:
        annotations[WEIGHTS] = json.dumps(weights, sort_keys=True, separators=(",", ":"))
    else:
        annotations.pop(WEIGHTS, None)


def _without(doc: Dict[str, Any], key: str) -> Dict[str, Any]:
    """``doc`` without ``key``, every other field (unknown ones too) as it was."""
    return {k: v for k, v in doc.items() if k != key}


def up(obj: Convertible) -> Convertible:
    """v1alpha1 -> v1beta1: the hosts become servers, with their weights from the annotation."""
    annotations = obj.annotations
    weights = _weights_of(annotations)
    resource = obj.resource
    if isinstance(resource, dict) and isinstance(resource.get("hosts"), list):
        servers = []
        for host in resource["hosts"]:
            weight = weights.pop(host, None)
            servers.append({"host": host} if weight is None else {"host": host, "weight": weight})
        resource = {**_without(resource, "hosts"), "servers": servers}
    # Weights of hosts the object does not list (an annotation edited by hand) stay where they are.
    _keep_weights(annotations, weights)
    observed = obj.observed
    if isinstance(observed, dict) and isinstance(observed.get("hosts"), list):
        observed = {**_without(observed, "hosts"), "servers": [{"host": h} for h in observed["hosts"]]}
    return replace(obj, resource=resource, observed=observed, annotations=annotations)


def down(obj: Convertible) -> Convertible:
    """v1beta1 -> v1alpha1: the servers become their hosts; the weights go into the annotation."""
    annotations = obj.annotations
    weights = _weights_of(annotations)
    resource = obj.resource
    if isinstance(resource, dict) and isinstance(resource.get("servers"), list):
        servers = resource["servers"]
        for s in servers:
            if not isinstance(s, dict) or "host" not in s:
                raise InvalidConfiguration(f"spec.resource.servers: {json.dumps(s)} is not a server with a host")
            if s.get("weight") is not None:
                weights[s["host"]] = s["weight"]
        resource = {**_without(resource, "servers"), "hosts": [s["host"] for s in servers]}
    _keep_weights(annotations, weights)
    observed = obj.observed
    if isinstance(observed, dict) and isinstance(observed.get("servers"), list):
        hosts = [s.get("host") for s in observed["servers"] if isinstance(s, dict)]
        observed = {**_without(observed, "servers"), "hosts": hosts}
    return replace(obj, resource=resource, observed=observed, annotations=annotations)


class Upstream(Actuator[UpstreamSpec, Filter, dict]):
    spec_type = UpstreamSpec
    filter_type = Filter

    def describe(self) -> Description:
        return Description(
            name="upstream-example",
            group=GROUP,
            version="v1beta1",
            kind="Upstream",
            plural="upstreams",
            resource_schema=schema_of(UpstreamSpec),
            filter_schema=schema_of(Filter),
            observed_schema=schema_of(Observed),
        )

    # Oldest first; the description's version with its schemas; one storage version.
    def versions(self) -> List[ApiVersion]:
        return [V1ALPHA1, self.describe().api_version(storage=True)]

    # Pure: no I/O, nothing but the arguments. The SDK has checked that both names are listed
    # and differ, and gives this call its own copy of the annotations.
    def convert(self, obj: Convertible, from_version: str, to_version: str) -> Convertible:
        return up(obj) if from_version == "v1alpha1" else down(obj)

    # The rest of the contract: this example has no external system.
    def get_by_id(self, obj: Object[UpstreamSpec], id: str) -> None:
        return None

    def create(self, obj: Object[UpstreamSpec]) -> Any:
        raise Unrecoverable("upstream-example manages nothing: it shows versions and convert")

    def delete(self, obj: Object[UpstreamSpec], res: Any) -> None:
        return None


Actuator = export(Upstream)
Conversion = export_conversion(Upstream)
