"""Unit tests of ``orchard_sdk.schema``: schemas derived from dataclasses, and the plugins'
derived schemas held to the ones they wrote by hand before (``hand_written_schemas.json``,
what their ``describe`` returned then), so that their CRDs do not change by accident."""

from __future__ import annotations

import enum
import importlib.util
import json
import os
import sys
import unittest
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

HERE = os.path.dirname(__file__)
ROOT = os.path.join(HERE, "..", "..", "..")
sys.path.insert(0, os.path.join(ROOT, "sdk", "python"))
sys.path.insert(0, os.path.join(ROOT, "plugins", "rabbitmq-client"))

from orchard_sdk import Raw  # noqa: E402
from orchard_sdk.schema import immutable, schema_of  # noqa: E402


class Colour(enum.Enum):
    RED = "red"
    BLUE = "blue"


@dataclass
class Port:
    number: int = field(metadata={"schema": {"minimum": 1}})
    name: Optional[str] = None


@dataclass
class Spec:
    name: str = field(metadata={"schema": {"minLength": 1, **immutable("name")}})
    ratio: float
    kind: Colour = field(metadata={"json": "type"})
    maybe: Optional[int]
    enabled: bool = True
    ports: List[Port] = field(default_factory=list)
    labels: Dict[str, str] = field(default_factory=dict)
    extra: Dict[str, Any] = field(default_factory=dict)
    anything: Any = None
    aliases: List[str] = field(default_factory=list, metadata={"schema": {"items": {"maxLength": 3}}})


@dataclass
class Open:
    __orchard_allow_unknown__ = True
    __orchard_schema__ = {"minProperties": 1}

    a: Optional[str] = None


@dataclass
class Loop:
    next: Optional["Loop"] = None


class DerivedTest(unittest.TestCase):
    def test_fields_types_required_and_metadata(self):
        self.assertEqual(schema_of(Spec), {
            "type": "object",
            "required": ["name", "ratio", "type"],
            "properties": {
                "name": {"type": "string", "minLength": 1, "x-kubernetes-validations": [
                    {"rule": "self == oldSelf", "message": "name is immutable"}]},
                "ratio": {"type": "number"},
                "type": {"type": "string", "enum": ["red", "blue"]},
                "maybe": {"type": "integer"},
                "enabled": {"type": "boolean"},
                "ports": {"type": "array", "items": {
                    "type": "object", "required": ["number"],
                    "properties": {"number": {"type": "integer", "minimum": 1}, "name": {"type": "string"}},
                }},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                "anything": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                "aliases": {"type": "array", "items": {"type": "string", "maxLength": 3}},
            },
        })

    def test_class_level_extensions_and_unknown_fields(self):
        self.assertEqual(schema_of(Open), {
            "type": "object", "properties": {"a": {"type": "string"}},
            "x-kubernetes-preserve-unknown-fields": True, "minProperties": 1,
        })
        self.assertEqual(immutable(), {"x-kubernetes-validations": [
            {"rule": "self == oldSelf", "message": "immutable"}]})

    def test_a_recursive_type_has_no_crd_schema(self):
        with self.assertRaises(TypeError):
            schema_of(Loop)


def load(plugin: str) -> Any:
    path = os.path.join(ROOT, "plugins", plugin, "app.py")
    spec = importlib.util.spec_from_file_location(plugin.replace("-", "_") + "_app", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


class PluginSchemasTest(unittest.TestCase):
    def test_the_derived_schemas_are_the_hand_written_ones(self):
        with open(os.path.join(HERE, "hand_written_schemas.json")) as f:
            before = json.load(f)
        for plugin, actuator in (("rabbitmq-vhost", "Vhost"), ("rabbitmq-queue", "Queue")):
            with self.subTest(plugin):
                described = Raw(getattr(load(plugin), actuator)()).describe()
                # As JSON text, what crosses the boundary: byte for byte.
                text = lambda v: json.dumps(v, separators=(",", ":"), sort_keys=True)  # noqa: E731
                self.assertEqual(described.resource_schema, text(before[plugin]["resourceSchema"]))
                self.assertEqual(described.filter_schema, text(before[plugin]["filterSchema"]))


if __name__ == "__main__":
    unittest.main()
