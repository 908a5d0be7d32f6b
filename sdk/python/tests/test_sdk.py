"""Unit tests of the Python SDK, natively (plain ``python3 -m unittest``): the typed layer,
the JSON codec, failures, ``ensure`` and the HTTP helper's status mapping."""

from __future__ import annotations

import enum
import json
import os
import sys
import unittest
from dataclasses import dataclass, field
from typing import Dict, List, Optional

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from orchard_sdk import (  # noqa: E402
    Actuator,
    Availability,
    Dependency,
    Description,
    InvalidConfiguration,
    Object,
    Raw,
    Resource,
    ResourceHandler,
    Shortcuts,
    Status,
    Transient,
    Unrecoverable,
    WaitEvent,
    decode,
    encode,
    ensure,
    export_shortcuts,
    http,
    report,
)
from orchard_sdk.codec import DecodeError, sample  # noqa: E402


@dataclass
class Binding:
    exchange: str
    routing_key: str = ""


@dataclass
class Spec:
    name: str
    queue_type: str = field(default="classic", metadata={"json": "type"})
    max_length: Optional[int] = None
    bindings: List[Binding] = field(default_factory=list)
    labels: Dict[str, str] = field(default_factory=dict)


@dataclass
class State:
    name: str
    size: int


class Thing(Actuator):
    spec_type = Spec
    state_type = State

    def describe(self):
        return Description(
            name="thing", group="example.dev", version="v1", kind="Thing", plural="things",
            resource_schema={"type": "object"}, observed_schema={"type": "object"},
        )

    def get_by_id(self, obj, id):
        if id == "gone":
            return None
        if id == "bug":
            return {}["nothing"]
        if id == "down":
            raise Transient("server down")
        return Resource(id, State(obj.spec.name, len(obj.spec.bindings)))

    def create(self, obj):
        spec = obj.require_spec()
        if spec.name == "later":
            return Status.waiting_on_external(WaitEvent.READY, "not yet", 1500)
        if spec.name == "bad":
            raise InvalidConfiguration("bad name")
        return Resource(spec.name, State(spec.name, 1))

    def delete(self, obj, res):
        return None

    def run_reconciler(self, name, obj, res):
        if name == "size":
            return Status.done() if res.state.size == 1 else Status.needs_refresh("size updated")
        return super().run_reconciler(name, obj, res)

    def available(self, obj, res):
        if res.state.size > 1:
            return Availability.AVAILABLE
        return Availability.UNAVAILABLE, Status.waiting_on_object("Parent", "p", WaitEvent.READY)


def obj(spec=None, text=None) -> Object:
    return Object(
        name="o", namespace="ns", spec=text if text is not None else (None if spec is None else json.dumps(spec)),
        dependencies=[Dependency("parent", "Parent", "p", "p-1", '{"a": 1}')],
        credentials={"key": b"s3cret", "bin": b"\xff"},
    )


class CodecTest(unittest.TestCase):
    def test_camel_case_keys_renames_defaults_and_nesting(self):
        s = decode(Spec, {"name": "q", "type": "quorum", "maxLength": 5,
                          "bindings": [{"exchange": "amq.topic", "routingKey": "a.#"}]})
        self.assertEqual(s, Spec("q", "quorum", 5, [Binding("amq.topic", "a.#")], {}))
        self.assertEqual(encode(s), {"name": "q", "type": "quorum", "maxLength": 5,
                                     "bindings": [{"exchange": "amq.topic", "routingKey": "a.#"}],
                                     "labels": {}})

    def test_unknown_missing_and_mistyped_fields_name_their_path(self):
        with self.assertRaisesRegex(DecodeError, r"\$: unknown field 'extra'"):
            decode(Spec, {"name": "q", "extra": 1})
        with self.assertRaisesRegex(DecodeError, r"\$: missing field 'name'"):
            decode(Spec, {})
        with self.assertRaisesRegex(DecodeError, r"\$.bindings\[0\].exchange: expected a string"):
            decode(Spec, {"name": "q", "bindings": [{"exchange": 3}]})
        with self.assertRaisesRegex(DecodeError, r"\$.maxLength: expected an integer, got a boolean"):
            decode(Spec, {"name": "q", "maxLength": True})


class RawTest(unittest.TestCase):
    raw = Raw(Thing())

    def test_describe_gives_schemas_as_json_text(self):
        d = self.raw.describe()
        self.assertEqual(d.resource_schema, '{"type":"object"}')
        self.assertIsNone(d.filter_schema)

    def test_get_by_id_parses_the_spec_and_serialises_the_state(self):
        r = self.raw.get_by_id(obj({"name": "x", "bindings": [{"exchange": "e"}]}), "x")
        self.assertEqual(json.loads(r.state), {"name": "x", "size": 1})
        self.assertIsNone(self.raw.get_by_id(obj({"name": "x"}), "gone"))

    def test_failures_pass_through_and_bugs_become_transient_failures(self):
        with self.assertRaises(Transient) as down:
            self.raw.get_by_id(obj({"name": "x"}), "down")
        self.assertEqual(down.exception.message, "server down")
        with self.assertLogs("orchard", "ERROR"), self.assertRaises(Transient) as bug:
            self.raw.get_by_id(obj({"name": "x"}), "bug")
        self.assertRegex(bug.exception.message, r"^plugin error: KeyError: 'nothing' \(in get_by_id, test_sdk.py:\d+\)$")

    def test_a_spec_that_does_not_fit_is_an_invalid_configuration_naming_the_object(self):
        with self.assertRaises(InvalidConfiguration) as e:
            self.raw.get_by_id(obj({"name": 7}), "x")
        self.assertEqual(e.exception.message, "o: spec.resource.name: expected a string, got a number")
        with self.assertRaisesRegex(InvalidConfiguration, "spec.resource is not JSON"):
            self.raw.get_by_id(obj(text="{"), "x")

    def test_create_gives_a_resource_or_a_status(self):
        self.assertEqual(self.raw.create(obj({"name": "a"})), Resource("a", '{"name":"a","size":1}'))
        self.assertEqual(self.raw.create(obj({"name": "later"})),
                         Status.waiting_on_external(WaitEvent.READY, "not yet", 1500))
        self.assertEqual(self.raw.create(obj({"name": "bad"})).failure, InvalidConfiguration("bad name"))
        self.assertEqual(self.raw.create(obj()).failure, InvalidConfiguration("spec.resource is required"))

    def test_delete_returning_none_is_done_and_unknown_reconcilers_are_unrecoverable(self):
        res = Resource("a", '{"name":"a","size":2}')
        self.assertTrue(self.raw.delete(obj({"name": "a"}), res).is_done())
        self.assertEqual(self.raw.run_reconciler("size", obj({"name": "a"}), res), Status.needs_refresh("size updated"))
        self.assertEqual(self.raw.run_reconciler("nope", obj({"name": "a"}), res).failure,
                         Unrecoverable("no reconciler named 'nope'"))
        self.assertEqual(self.raw.delete(obj({"name": "a"}), Resource("a", "{")).failure.kind, "transient")

    def test_available_and_observed(self):
        a, s = self.raw.available(obj({"name": "a"}), Resource("a", '{"name":"a","size":1}'))
        self.assertEqual((a, s), (Availability.UNAVAILABLE, Status.waiting_on_object("Parent", "p", WaitEvent.READY)))
        self.assertEqual(self.raw.observed(Resource("a", '{"name":"a","size":2}')), '{"name":"a","size":2}')
        self.assertEqual(self.raw.observed(Resource("a", "not json")), "null")


class ShortcutsTest(unittest.TestCase):
    def test_an_actuator_declares_no_shortcut_by_default(self):
        self.assertEqual(Raw(Thing()).shortcuts(), Shortcuts())
        self.assertEqual(export_shortcuts(Thing).declared, Shortcuts())

    def test_shortcuts_are_read_from_a_method_or_a_class_attribute(self):
        class ByMethod(Thing):
            def shortcuts(self) -> Shortcuts:
                return Shortcuts(create_refuses_duplicates=True)

        class ByAttribute(Thing):
            shortcuts = Shortcuts(delete_is_synchronous=True)

        self.assertEqual(export_shortcuts(ByMethod).declared,
                         Shortcuts(create_refuses_duplicates=True))
        self.assertEqual(export_shortcuts(ByAttribute).declared,
                         Shortcuts(delete_is_synchronous=True))

    def test_a_delete_without_state_goes_to_delete_by_id_when_the_plugin_declares_it(self):
        class ByName(Thing):
            shortcuts = Shortcuts(delete_is_synchronous=True, delete_by_id=True)

            def __init__(self):
                self.deleted = []

            def delete(self, obj, res):
                self.deleted.append(("delete", res.id, res.state.size))

            def delete_by_id(self, obj, id):
                self.deleted.append(("delete_by_id", id))

        raw = Raw(ByName())
        self.assertTrue(raw.delete(obj({"name": "a"}), Resource("a", "null")).is_done())
        # A resource the host read (found by adoption) still goes to `delete`, typed.
        self.assertTrue(raw.delete(obj({"name": "a"}), Resource("a", '{"name": "a", "size": 3}')).is_done())
        self.assertEqual(raw.a.deleted, [("delete_by_id", "a"), ("delete", "a", 3)])

    def test_a_plugin_that_does_not_declare_delete_by_id_reads_a_null_state_as_its_own(self):
        # Thing's state is a dataclass: a null one is a state it cannot read, as before.
        status = Raw(Thing()).delete(obj({"name": "a"}), Resource("a", "null"))
        self.assertIsNotNone(status.failure)

    def test_a_plugin_that_declares_delete_by_id_without_implementing_it_fails_naming_it(self):
        class Declares(Thing):
            shortcuts = Shortcuts(delete_by_id=True)

        status = Raw(Declares()).delete(obj({"name": "a"}), Resource("a", "null"))
        self.assertIsInstance(status.failure, Unrecoverable)
        self.assertIn("does not implement delete_by_id (asked to delete a)", str(status.failure))

    def test_a_declaration_that_is_not_shortcuts_fails_the_build_naming_the_actuator(self):
        class Flags(Thing):
            shortcuts = {"delete_is_synchronous": True}

        with self.assertRaisesRegex(TypeError, "Flags.shortcuts: expected an orchard_sdk.Shortcuts, got dict"):
            export_shortcuts(Flags)


class ObjectTest(unittest.TestCase):
    def test_dependencies_and_credentials(self):
        o = obj({"name": "x"})
        self.assertEqual(o.dependency_id("parent"), "p-1")
        self.assertEqual(o.dependency("parent").observed_json(), {"a": 1})
        self.assertRaisesRegex(Transient, "dependency zone was not resolved", o.dependency_id, "zone")
        self.assertEqual(o.credential("key"), "s3cret")
        self.assertEqual(o.credential("missing", "fallback"), "fallback")
        self.assertRaisesRegex(InvalidConfiguration, "has no key 'missing'", o.credential, "missing")
        self.assertRaisesRegex(InvalidConfiguration, "not UTF-8", o.credential, "bin")


class Returns(Thing):
    """Returns failures instead of raising them, and raises from a helper: the same statuses."""

    def create(self, obj):
        return InvalidConfiguration("bad name") if obj.require_spec().name == "bad" else super().create(obj)

    def delete(self, obj, res):
        obj.credential("apiKey")  # raises from a helper, anywhere in the handler

    def run_reconciler(self, name, obj, res):
        return Transient("server down")

    def available(self, obj, res):
        return Unrecoverable("gone for good")


class ShortFormTest(unittest.TestCase):
    raw = Raw(Returns())

    def test_an_object_in_one_line_with_text_credentials_and_a_spec_value(self):
        o = Object("www", spec={"name": "a"}, credentials={"apiKey": "k"}, status_id="a",
                   dependencies=[Dependency("parent", "Parent", "p", id="p-1")])
        self.assertEqual((o.namespace, o.uid, o.generation, o.labels), ("default", "", 0, {}))
        self.assertEqual(o.credentials, {"apiKey": b"k"})
        self.assertEqual(o.credential("apiKey"), "k")
        self.assertEqual(o.dependency_id("parent"), "p-1")
        # Raw takes the spec (and a state) as a JSON value as well as JSON text.
        self.assertEqual(Raw(Thing()).create(o), Resource("a", '{"name":"a","size":1}'))
        self.assertTrue(Raw(Thing()).delete(o, Resource("a", {"name": "a", "size": 1})).is_done())
        typed = Object("www", spec=Spec("a"))
        self.assertEqual(Thing().create(typed), Resource("a", State("a", 1)))

    def test_a_returned_failure_is_the_status_a_raised_one_gives(self):
        spec = {"name": "a"}
        res = Resource("a", '{"name":"a","size":2}')
        self.assertEqual(self.raw.create(Object("o", spec={"name": "bad"})),
                         Status.failed(InvalidConfiguration("bad name")))
        self.assertEqual(self.raw.delete(Object("o", spec=spec), res),
                         Status.failed(InvalidConfiguration("credentials Secret has no key 'apiKey'")))
        self.assertTrue(self.raw.delete(Object("o", spec=spec, credentials={"apiKey": "k"}), res).is_done())
        self.assertEqual(self.raw.run_reconciler("size", Object("o", spec=spec), res),
                         Status.failed(Transient("server down")))
        self.assertEqual(self.raw.available(Object("o", spec=spec), res),
                         (Availability.UNKNOWN, Status.failed(Unrecoverable("gone for good"))))


class Limit(ResourceHandler[int]):
    name = "limit"

    def __init__(self, desired, current):
        self.desired, self.value, self.calls = desired, current, []

    def is_required(self):
        return self.desired is not None

    def current(self):
        return self.value

    def create(self):
        self.calls.append("create")
        self.value = self.desired

    def update(self, current):
        self.calls.append("update")
        self.value = self.desired
        return current != self.desired

    def delete(self, current):
        self.calls.append("delete")
        self.value = None


class EnsureTest(unittest.TestCase):
    def test_the_four_cases(self):
        self.assertEqual(ensure(Limit(5, None)), Status.needs_refresh("limit created"))
        self.assertEqual(ensure(Limit(5, 4)), Status.needs_refresh("limit updated"))
        same = Limit(5, 5)
        self.assertTrue(ensure(same).is_done())
        self.assertEqual(same.calls, ["update"])
        self.assertEqual(ensure(Limit(None, 5)), Status.needs_refresh("limit deleted"))
        untouched = Limit(None, None)
        self.assertTrue(ensure(untouched).is_done())
        self.assertEqual(untouched.calls, [])

    def test_a_failing_step_is_a_failed_status(self):
        class Broken(Limit):
            def create(self):
                raise Transient("down")
        self.assertEqual(ensure(Broken(5, None)), Status.failed(Transient("down")))


class HttpTest(unittest.TestCase):
    def test_statuses_map_to_failures_like_the_rust_sdk(self):
        r = lambda status: http.Response(status, [], b"nope")  # noqa: E731
        self.assertEqual(r(204).raise_for_status("x").status, 204)
        self.assertRaises(InvalidConfiguration, r(400).raise_for_status, "x")
        for status in (404, 409, 429, 500):
            self.assertRaises(Transient, r(status).raise_for_status, "x")
        self.assertEqual(http.basic_auth("a", "b"), "Basic YTpi")
        self.assertEqual(http.quote("a/b c"), "a%2Fb%20c")
        self.assertEqual(http.split_url("http://h:1/p?q=1"), ("http", "h:1", "/p?q=1"))
        self.assertRaises(http.InvalidUrl, http.split_url, "ftp://h")

    def test_no_response_is_a_transient_transport_error(self):
        with self.assertRaises(http.TransportError):
            http.get("http://127.0.0.1:1/")


class ReportTest(unittest.TestCase):
    def setUp(self) -> None:
        report.take()

    def test_reports_are_collected_natively_values_as_json(self) -> None:
        report.connection_detail("password", "s3cret")
        report.connection_detail("raw", b"\xff")
        report.drift("kind", "Native", "Master")
        report.drift("ttl", None, 60)
        report.drift("binding", Binding("x"), None, sensitive=True)
        got = report.take()
        self.assertEqual(got.connection_details, [("password", b"s3cret"), ("raw", b"\xff")])
        self.assertEqual(got.detail("password"), "s3cret")
        self.assertEqual(
            got.drifts,
            [
                report.Drift("kind", '"Native"', '"Master"', False),
                report.Drift("ttl", None, "60", False),
                report.Drift("binding", '{"exchange":"x","routingKey":""}', None, True),
            ],
        )
        self.assertEqual(report.take(), ([], []))
        with self.assertRaises(TypeError):
            report.connection_detail("n", 7)  # type: ignore[arg-type]

    def test_diff_compares_dotted_fields_and_reports_on_demand(self) -> None:
        observed = {"kind": "Native", "settings": {"ttl": 60}, "tags": ["a"]}
        desired = {"kind": "Native", "settings": {"ttl": 300}, "tags": ["a"], "account": "a"}
        d = report.diff(observed, desired, ["kind", "settings.ttl", "tags", "account"], sensitive=["account"])
        self.assertEqual(d.fields, ["settings.ttl", "account"])
        self.assertEqual(report.drifts, [])
        self.assertEqual(d.report(), 2)
        self.assertEqual(
            report.take().drifts,
            [report.Drift("settings.ttl", "60", "300"), report.Drift("account", None, '"a"', True)],
        )
        self.assertFalse(report.diff(Binding("x"), Binding("x"), ["exchange", "routing_key"]))
        self.assertEqual(report.Diff().field("b", Binding("x"), Binding("y")).fields, ["b"])

    def test_the_native_collector_is_bounded(self) -> None:
        for i in range(report.NATIVE_LIMIT + 3):
            report.drift("f", i, None)
        self.assertEqual(len(report.take().drifts), report.NATIVE_LIMIT)


if __name__ == "__main__":
    unittest.main()


class Colour(enum.Enum):
    RED = "red"
    BLUE = "blue"


@dataclass
class Node:
    name: str
    colour: Colour = Colour.BLUE
    weight: float = 0.5
    children: List["Node"] = field(default_factory=list)
    parent: Optional["Node"] = None


@dataclass
class Loop:
    next: "Loop"


class WarmUpTest(unittest.TestCase):
    def test_a_sample_decodes_as_its_type_with_every_field_present(self):
        spec = decode(Spec, json.loads(json.dumps(sample(Spec))))
        self.assertEqual(spec, Spec("sample", "sample", 1, [Binding("sample", "sample")], {"sample": "sample"}))
        decoded = decode(Node, sample(Node))
        self.assertEqual((decoded.colour, decoded.weight), (Colour.RED, 1.0))
        # A recursive type ends: optional fields are left out three levels down.
        depth, n = 0, decoded
        while n.children:
            n, depth = n.children[0], depth + 1
        self.assertEqual(depth, 2)
        self.assertIsNone(n.parent)
        # A type that requires itself has no finite value: its sample still ends.
        self.assertIsNotNone(sample(Loop)["next"])
        with self.assertRaises(DecodeError):
            decode(Loop, sample(Loop))

    def test_the_samples_of_a_plugin_pass_its_own_calls(self):
        from orchard_sdk._export import samples

        spec, state = samples(Thing)
        raw = Raw(Thing())
        o = obj(text=spec)
        res = Resource("sample", state)
        self.assertEqual(raw.reconcilers(o, res), [])
        self.assertEqual(json.loads(raw.observed(res)), {"name": "sample", "size": 1})
        self.assertEqual(raw.available(o, res)[0], Availability.UNAVAILABLE)

    def test_nothing_leaves_the_plugin_while_the_warm_up_runs(self):
        from orchard_sdk import _warmup, log

        report.take()
        with _warmup.running():
            with self.assertRaises(http.TransportError) as raised:
                http.get("http://127.0.0.1:1/")
            report.drift("kind", "Native", "Master")
            report.connection_detail("password", "s3cret")
            with self.assertNoLogs("orchard"):
                log.warn("not sent")
        self.assertIn("while the component is built", str(raised.exception))
        self.assertEqual(report.take(), ([], []))
        self.assertFalse(_warmup.active)
        with self.assertLogs("orchard"):
            log.warn("sent")
