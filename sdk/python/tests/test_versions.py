"""Unit tests of the SDK's several API versions (WIT interface ``conversion``), natively:
``Actuator.versions`` checked as the component checks it, ``Raw.convert`` (JSON text in and out,
names refused, failures), the helpers of ``orchard_sdk.versions``, ``export_conversion``, and the
world ``build.sh`` picks (``orchard_sdk._world``)."""

from __future__ import annotations

import json
import os
import sys
import unittest
from dataclasses import dataclass, replace
from typing import List

HERE = os.path.dirname(__file__)
ROOT = os.path.join(HERE, "..", "..", "..")
sys.path.insert(0, os.path.join(ROOT, "sdk", "python"))

from orchard_sdk import (  # noqa: E402
    Actuator,
    ApiVersion,
    Convertible,
    Description,
    InvalidConfiguration,
    Raw,
    Transient,
    Unrecoverable,
    check_round_trip,
    check_versions,
    export,
    export_conversion,
)
from orchard_sdk import _world  # noqa: E402
from orchard_sdk.schema import schema_of  # noqa: E402


@dataclass
class SizeV1:
    size: int


class OneVersion(Actuator):
    def describe(self) -> Description:
        return Description(
            name="sizes",
            group="example.dev",
            version="v2",
            kind="Size",
            plural="sizes",
            resource_schema={"type": "object"},
            observed_schema='{"type":"object"}',
            filter_schema={"type": "object"},
        )


V1 = ApiVersion("v1", resource_schema=schema_of(SizeV1), observed_schema='{"type":"object"}')

UNIT = "example.dev/unit"


class TwoVersions(OneVersion):
    """v1 ``{size: n}`` <-> v2 ``{size: {value: n, unit}}``; the unit waits in an annotation at
    v1. Some sizes make it misbehave, for the failure tests."""

    calls: List[tuple] = []

    def versions(self) -> List[ApiVersion]:
        return [V1, self.describe().api_version(storage=True)]

    def convert(self, obj: Convertible, from_version: str, to_version: str) -> Convertible:
        TwoVersions.calls.append((from_version, to_version))
        r = obj.resource
        if r == {"size": "boom"}:
            raise Transient("boom")
        if r == {"size": "invalid"}:
            raise InvalidConfiguration("size cannot be converted")
        if r == {"size": "bug"}:
            return r["nothing"]
        if r == {"size": "nothing"}:
            return None  # type: ignore[return-value]
        if r == {"size": "badAnnotation"}:
            return replace(obj, annotations={UNIT: 1})
        if r == {"size": "nan"}:
            return replace(obj, resource={"size": float("nan")})
        if from_version == "v1":
            unit = obj.annotations.pop(UNIT, None)
            size = {"value": r["size"]} if unit is None else {"value": r["size"], "unit": unit}
            return replace(obj, resource={**r, "size": size})
        if "unit" in r["size"]:
            obj.annotations[UNIT] = r["size"]["unit"]
        return replace(obj, resource={**r, "size": r["size"]["value"]})


def text(**docs) -> Convertible:
    """A Convertible as the host sends it: documents as JSON text."""
    annotations = docs.pop("annotations", {})
    return Convertible(**{k: json.dumps(v) for k, v in docs.items()}, annotations=annotations)


class VersionsTest(unittest.TestCase):
    def test_a_plugin_without_versions_lists_none_and_refuses_to_convert(self):
        self.assertEqual(Raw(OneVersion()).versions(), [])
        with self.assertRaises(Unrecoverable) as e:
            Raw(OneVersion()).convert(text(resource={}), "v1", "v2")
        self.assertEqual(e.exception.message, "this plugin serves one API version (asked to convert v1 to v2)")

    def test_versions_give_their_schemas_as_json_text_the_description_version_with_its_own(self):
        v1, v2 = check_versions(TwoVersions)
        self.assertEqual((v1.name, v1.storage, v2.name, v2.storage), ("v1", False, "v2", True))
        self.assertEqual(
            json.loads(v1.resource_schema),
            {"type": "object", "required": ["size"], "properties": {"size": {"type": "integer"}}},
        )
        self.assertIsNone(v1.filter_schema)
        d = Raw(TwoVersions()).describe()
        self.assertEqual(
            (v2.resource_schema, v2.observed_schema, v2.filter_schema),
            (d.resource_schema, d.observed_schema, d.filter_schema),
        )

    def test_versions_may_be_a_class_attribute(self):
        class Attribute(OneVersion):
            versions = [V1, OneVersion().describe().api_version(storage=True)]

        self.assertEqual([v.name for v in check_versions(Attribute)], ["v1", "v2"])

    def test_versions_that_break_the_contract_are_refused_naming_the_rule(self):
        described = OneVersion().describe().api_version(storage=True)
        cases = [
            ([V1, replace(described, storage=False)], "exactly one version must be the storage version, 0 are"),
            ([replace(V1, storage=True), described], "exactly one version must be the storage version, 2 are (v1, v2)"),
            ([V1, V1, described], "version v1 is listed twice"),
            ([replace(V1, name="V1"), described], "version 'V1' must be a DNS-1123 label"),
            ([replace(V1, resource_schema="[]"), described], "version v1: resource_schema must be a JSON object"),
            ([replace(V1, observed_schema="{"), described], "version v1: observed_schema is not JSON"),
            ([replace(V1, storage=True)], "the description's version v2 is not listed"),
            (
                [V1, replace(described, resource_schema={"type": "object", "x": 1})],
                "version v2 lists other schemas than the description's",
            ),
            ([V1, replace(described, filter_schema=None)], "version v2 lists other schemas than the description's"),
            ([replace(V1, name=f"v{i}") for i in range(17)], "17 versions listed, at most 16"),
        ]
        for listed, says in cases:
            class Broken(OneVersion):
                versions = listed

            with self.subTest(says=says), self.assertRaises(ValueError) as e:
                check_versions(Broken)
            self.assertIn("Broken.versions: " + says, str(e.exception))
        class NotAList(OneVersion):
            versions = V1

        with self.assertRaisesRegex(TypeError, "must be a list of ApiVersion, got ApiVersion"):
            check_versions(NotAList)


class ConvertTest(unittest.TestCase):
    def convert(self, obj: Convertible, from_version: str, to_version: str) -> Convertible:
        return Raw(TwoVersions()).convert(obj, from_version, to_version)

    def test_convert_parses_what_comes_in_and_serialises_what_goes_out(self):
        v2 = text(resource={"size": {"value": 3, "unit": "GiB"}}, filter={"a": 1}, annotations={"team": "x"})
        v1 = self.convert(v2, "v2", "v1")
        self.assertEqual(v1, Convertible('{"size":3}', '{"a":1}', None, {"team": "x", UNIT: "GiB"}))
        back = self.convert(v1, "v1", "v2")
        self.assertEqual(json.loads(back.resource), {"size": {"value": 3, "unit": "GiB"}})
        self.assertEqual((back.filter, back.observed, back.annotations), ('{"a":1}', None, {"team": "x"}))

    def test_the_plugin_changes_its_own_copy_of_the_annotations(self):
        sent = text(resource={"size": {"value": 1, "unit": "MiB"}}, annotations={"team": "x"})
        self.convert(sent, "v2", "v1")
        self.assertEqual(sent.annotations, {"team": "x"})

    def test_the_same_version_answers_the_object_as_it_came_without_the_plugin(self):
        TwoVersions.calls = []
        sent = Convertible('{ "size" : 1 }', None, "not even JSON", {"a": "b"})
        self.assertEqual(self.convert(sent, "v1", "v1"), sent)
        self.assertEqual(TwoVersions.calls, [])

    def test_a_version_the_kind_does_not_list_is_refused_naming_it_before_the_plugin_sees_it(self):
        TwoVersions.calls = []
        for from_version, to_version in (("v1", "v3"), ("v0", "v2"), ("v3", "v3")):
            with self.subTest(to=to_version), self.assertRaises(Unrecoverable) as e:
                self.convert(text(resource={"size": 1}), from_version, to_version)
            self.assertEqual(
                e.exception.message,
                f"this plugin serves versions v1, v2: cannot convert {from_version} to {to_version}",
            )
        self.assertEqual(TwoVersions.calls, [])

    def test_a_document_that_is_not_json_is_an_invalid_configuration_naming_the_field(self):
        for field, name in (("resource", "spec.resource"), ("filter", "spec.import.filter"), ("observed", "status.resource")):
            with self.subTest(field=field), self.assertRaises(InvalidConfiguration) as e:
                self.convert(replace(text(resource={"size": 1}), **{field: "{"}), "v1", "v2")
            self.assertTrue(e.exception.message.startswith(f"{name} at version v1 is not JSON: "), e.exception.message)

    def test_failures_pass_through_and_bugs_and_bad_answers_become_transient_failures(self):
        cases = [
            ("boom", Transient("boom")),
            ("invalid", InvalidConfiguration("size cannot be converted")),
        ]
        for size, failure in cases:
            with self.subTest(size=size), self.assertRaises(type(failure)) as e:
                self.convert(text(resource={"size": size}), "v1", "v2")
            self.assertEqual(e.exception, failure)
        bugs = [
            ("bug", "plugin error: KeyError: 'nothing'"),
            ("nothing", "plugin error: TypeError: convert must return a Convertible, got NoneType"),
            ("badAnnotation", "plugin error: TypeError: convert must return annotations as a dict of str to str"),
            ("nan", "plugin error: ValueError: Out of range float values are not JSON compliant"),
        ]
        for size, says in bugs:
            # A bug's traceback goes to the host's log (natively: logger `orchard`).
            with self.subTest(size=size), self.assertLogs("orchard", "ERROR") as logged:
                with self.assertRaises(Transient) as e:
                    self.convert(text(resource={"size": size}), "v1", "v2")
            self.assertTrue(e.exception.message.startswith(says), e.exception.message)
            self.assertIn("convert v1 to v2: unexpected exception", logged.output[0])

    def test_json_null_is_a_document_the_object_does_not_have(self):
        out = self.convert(Convertible('{"size":1}', "null", None, {}), "v1", "v2")
        self.assertEqual((out.filter, out.observed), (None, None))


class HelpersTest(unittest.TestCase):
    def test_a_round_trip_that_gives_the_object_back_returns_it_at_the_other_version(self):
        at_v1 = check_round_trip(
            TwoVersions, Convertible({"size": {"value": 3, "unit": "GiB"}}, annotations={"a": "b"}), "v2", "v1"
        )
        self.assertEqual(at_v1, Convertible({"size": 3}, None, None, {"a": "b", UNIT: "GiB"}))

    def test_a_round_trip_that_loses_a_field_fails_saying_what_differs(self):
        class Lossy(TwoVersions):
            def convert(self, obj, from_version, to_version):
                out = super().convert(obj, from_version, to_version)
                out.annotations.pop(UNIT, None)  # forgets the unit
                return out

        with self.assertRaises(AssertionError) as e:
            check_round_trip(Lossy, Convertible({"size": {"value": 3, "unit": "GiB"}}), "v2", "v1")
        self.assertEqual(
            str(e.exception),
            'v2 to v1 and back is not the object that went in: resource went {"size": {"unit": "GiB", '
            '"value": 3}}, came back {"size": {"value": 3}}',
        )

    def test_a_round_trip_whose_conversion_fails_names_the_failure(self):
        with self.assertRaisesRegex(AssertionError, r"^convert v1 to v2: Transient\('boom'\)$"):
            check_round_trip(TwoVersions, Convertible({"size": "boom"}), "v1", "v2")


class ExportTest(unittest.TestCase):
    def test_export_conversion_reads_and_checks_the_versions_once_when_the_module_is_loaded(self):
        self.assertEqual([v.name for v in export_conversion(TwoVersions).listed], ["v1", "v2"])
        self.assertEqual(export_conversion(OneVersion).listed, [])

        class Broken(OneVersion):
            versions = [replace(V1, storage=True)]

        with self.assertRaisesRegex(ValueError, "the description's version v2 is not listed"):
            export_conversion(Broken)

    def test_natively_export_does_not_require_a_conversion_export(self):
        # The check that app.py binds `Conversion` runs in the component only (world known).
        self.assertEqual(export(TwoVersions, warm_up=False).__name__, "Actuator")


class WorldTest(unittest.TestCase):
    def test_an_app_that_binds_conversion_at_its_top_level_builds_the_versioned_world(self):
        for source in (
            "Conversion = export_conversion(A)",
            "Actuator, Conversion = export(A), export_conversion(A)",
            "from shared import Conversion",
            "import shared.versions as Conversion",
            "class Conversion: pass",
            "try:\n    Conversion = f()\nexcept ImportError:\n    pass",
            "Conversion: type = f()",
        ):
            with self.subTest(source=source):
                self.assertEqual(_world.world_of(source), _world.VERSIONED)

    def test_an_app_that_does_not_builds_the_plain_world(self):
        for source in (
            "Actuator = export(A)",
            "def f():\n    Conversion = 1",
            "class A:\n    Conversion = 1",
            "conversion = export_conversion(A)",
        ):
            with self.subTest(source=source):
                self.assertEqual(_world.world_of(source), _world.PLAIN)

    def test_an_app_that_binds_shortcuts_and_conversion_builds_the_shortcut_world(self):
        for source in (
            "Conversion = export_conversion(A)\nShortcuts = export_shortcuts(A)",
            "Actuator, Conversion, Shortcuts = export(A), export_conversion(A), export_shortcuts(A)",
            "from shared import Conversion, Shortcuts",
        ):
            with self.subTest(source=source):
                self.assertEqual(_world.world_of(source), _world.SHORTCUT)

    def test_an_app_that_binds_shortcuts_without_conversion_is_an_error_naming_the_fix(self):
        with self.assertRaisesRegex(ValueError, "app.py binds `Shortcuts` but not `Conversion`.*"
                                    "Conversion = export_conversion"):
            _world.world_of("Actuator = export(A)\nShortcuts = export_shortcuts(A)")

    def test_the_rabbitmq_plugins_and_the_example_build_their_worlds(self):
        def world(path: str) -> str:
            with open(os.path.join(ROOT, path), encoding="utf-8") as f:
                return _world.world_of(f.read())

        self.assertEqual(world("plugins/rabbitmq-vhost/app.py"), _world.SHORTCUT)
        self.assertEqual(world("plugins/rabbitmq-queue/app.py"), _world.PLAIN)
        self.assertEqual(world("sdk/python/examples/versioned/app.py"), _world.VERSIONED)


if __name__ == "__main__":
    unittest.main()
