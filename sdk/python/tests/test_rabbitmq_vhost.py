"""Unit tests of the ``rabbitmq-vhost`` plugin, natively (run with the SDK's tests): the drifts
its reconcilers report, against a fake RabbitMQ client."""

from __future__ import annotations

import os
import sys
import unittest
from unittest import mock

ROOT = os.path.join(os.path.dirname(__file__), "..", "..", "..")
sys.path.insert(0, os.path.join(ROOT, "sdk", "python"))
sys.path.insert(0, os.path.join(ROOT, "plugins", "rabbitmq-client"))
sys.path.insert(0, os.path.join(ROOT, "plugins", "rabbitmq-vhost"))

import app  # noqa: E402
from orchard_sdk import Object, Resource, Status, report  # noqa: E402


class FakeClient:
    def __init__(self) -> None:
        self.calls: list = []

    def put_vhost(self, *args) -> None:
        self.calls.append(("put_vhost",) + args)

    def set_vhost_limit(self, *args) -> None:
        self.calls.append(("set_vhost_limit",) + args)

    def delete_vhost_limit(self, *args) -> None:
        self.calls.append(("delete_vhost_limit",) + args)


class VhostDriftTest(unittest.TestCase):
    def setUp(self) -> None:
        report.take()
        self.client = FakeClient()
        patcher = mock.patch.object(app.Client, "for_object", return_value=self.client)
        patcher.start()
        self.addCleanup(patcher.stop)

    def run_reconciler(self, name: str, spec: app.VhostSpec, have: app.VhostState) -> Status:
        return app.Vhost().run_reconciler(name, Object("v", spec=spec), Resource("v", have))

    def test_metadata_changed_back_is_reported_field_by_field(self) -> None:
        have = app.VhostState("v", description="old", tags=["b", "a"], tracing=False)
        got = self.run_reconciler("metadata", app.VhostSpec("v", description="new", tags=["a", "b"]), have)
        self.assertEqual(got, Status.needs_refresh("vhost metadata updated"))
        self.assertEqual(report.take().drifts, [report.Drift("description", '"old"', '"new"')])
        same = app.VhostSpec("v", description="old", tags=["a", "b"])
        self.assertEqual(self.run_reconciler("metadata", same, have), Status.done())
        self.assertEqual(report.take(), ([], []))

    def test_limits_set_changed_and_removed_are_reported(self) -> None:
        have = app.VhostState("v", limits={"max-connections": 10, "max-queues": 5})
        self.run_reconciler("limits", app.VhostSpec("v", max_connections=20), have)
        self.assertEqual(
            report.take().drifts,
            [report.Drift("maxConnections", "10", "20"), report.Drift("maxQueues", "5", None)],
        )
        self.run_reconciler("limits", app.VhostSpec("v", max_queues=1), app.VhostState("v"))
        self.assertEqual(report.take().drifts, [report.Drift("maxQueues", None, "1")])
        self.assertEqual(self.client.calls[-1], ("set_vhost_limit", "v", "max-queues", 1))


if __name__ == "__main__":
    unittest.main()
