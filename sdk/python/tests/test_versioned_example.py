"""Unit tests of the two-version example (``sdk/python/examples/versioned``), natively: its
versions, both directions, the round trips and a bad annotation. ``component.sh`` runs the same
conversions on the built component through the ``orchard`` CLI."""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import unittest

HERE = os.path.dirname(__file__)
ROOT = os.path.join(HERE, "..", "..", "..")
sys.path.insert(0, os.path.join(ROOT, "sdk", "python"))

from orchard_sdk import Convertible, InvalidConfiguration, Raw, check_round_trip, check_versions  # noqa: E402

# Loaded under a name of its own: the plugins' tests import their `app` modules as `app`.
_spec = importlib.util.spec_from_file_location(
    "versioned_example_app", os.path.join(ROOT, "sdk", "python", "examples", "versioned", "app.py")
)
app = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = app  # dataclasses and the codec resolve its annotations through it
_spec.loader.exec_module(app)

WEIGHTS = "examples.orchard.dev/v1beta1-server-weights"


def beta() -> Convertible:
    return Convertible(
        resource={"name": "web", "servers": [{"host": "a.example"}, {"host": "b.example", "weight": 5}]},
        filter={"name": "web"},
        observed={"servers": [{"host": "a.example"}]},
        annotations={"team": "web"},
    )


def alpha() -> Convertible:
    return Convertible(
        resource={"name": "web", "hosts": ["a.example", "b.example"]},
        filter={"name": "web"},
        observed={"hosts": ["a.example"]},
        annotations={"team": "web", WEIGHTS: '{"b.example":5}'},
    )


def convert(obj: Convertible, from_version: str, to_version: str) -> Convertible:
    """Through the SDK's checks, as the component converts: JSON text in and out."""
    dump = lambda d: None if d is None else json.dumps(d)  # noqa: E731
    load = lambda t: None if t is None else json.loads(t)  # noqa: E731
    out = Raw(app.Upstream()).convert(
        Convertible(dump(obj.resource), dump(obj.filter), dump(obj.observed), dict(obj.annotations)),
        from_version,
        to_version,
    )
    return Convertible(load(out.resource), load(out.filter), load(out.observed), out.annotations)


class VersionedExampleTest(unittest.TestCase):
    def test_two_versions_oldest_first_the_description_is_v1beta1_the_storage_version(self):
        versions = check_versions(app.Upstream)
        self.assertEqual([(v.name, v.storage) for v in versions], [("v1alpha1", False), ("v1beta1", True)])
        d = Raw(app.Upstream()).describe()
        self.assertEqual(d.version, "v1beta1")
        self.assertEqual(
            (versions[1].resource_schema, versions[1].filter_schema, versions[1].observed_schema),
            (d.resource_schema, d.filter_schema, d.observed_schema),
        )
        self.assertEqual(set(json.loads(versions[0].resource_schema)["properties"]), {"name", "hosts"})
        self.assertEqual(set(json.loads(versions[1].resource_schema)["properties"]), {"name", "servers"})
        # The component exports the same list (read once, when app.py is loaded).
        self.assertEqual(app.Conversion.listed, versions)

    def test_v1beta1_to_v1alpha1_keeps_the_weights_in_the_annotation_and_back(self):
        down = convert(beta(), "v1beta1", "v1alpha1")
        self.assertEqual(down, alpha())
        self.assertEqual(convert(down, "v1alpha1", "v1beta1"), beta())

    def test_round_trips_from_either_version_give_the_object_back(self):
        cases = [
            (alpha(), "v1alpha1", "v1beta1"),
            (beta(), "v1beta1", "v1alpha1"),
            (Convertible(resource={"name": "x"}), "v1alpha1", "v1beta1"),
            (Convertible(resource={"name": "x", "servers": []}), "v1beta1", "v1alpha1"),
            (Convertible(observed={"servers": [{"host": "h"}]}, annotations={"a": "b"}), "v1beta1", "v1alpha1"),
            # A weight of 0 is a weight; a field neither version knows passes through.
            (Convertible(resource={"name": "x", "servers": [{"host": "h", "weight": 0}], "later": 1}), "v1beta1", "v1alpha1"),
        ]
        for obj, from_version, to_version in cases:
            with self.subTest(obj=obj, from_version=from_version):
                check_round_trip(app.Upstream, obj, from_version, to_version)

    def test_weights_of_hosts_the_object_does_not_list_stay_in_the_annotation(self):
        obj = Convertible(resource={"name": "web", "hosts": ["a"]}, annotations={WEIGHTS: '{"a":1,"gone":2}'})
        up = convert(obj, "v1alpha1", "v1beta1")
        self.assertEqual(up.resource, {"name": "web", "servers": [{"host": "a", "weight": 1}]})
        self.assertEqual(up.annotations, {WEIGHTS: '{"gone":2}'})

    def test_an_annotation_that_is_not_a_map_of_weights_is_an_invalid_configuration_naming_it(self):
        bad = Convertible(resource={"name": "web", "hosts": []}, annotations={WEIGHTS: "[1]"})
        with self.assertRaises(InvalidConfiguration) as e:
            convert(bad, "v1alpha1", "v1beta1")
        self.assertEqual(
            e.exception.message,
            "annotation examples.orchard.dev/v1beta1-server-weights is not a JSON map of host to weight: [1]",
        )

    def test_a_server_without_a_host_is_an_invalid_configuration(self):
        bad = Convertible(resource={"name": "web", "servers": [{"weight": 1}]})
        with self.assertRaisesRegex(InvalidConfiguration, r'^spec\.resource\.servers: \{"weight": 1\} is not a server with a host$'):
            convert(bad, "v1beta1", "v1alpha1")


if __name__ == "__main__":
    unittest.main()
