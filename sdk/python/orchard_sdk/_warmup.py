"""The warm-up while a component is built.

componentize-py runs the plugin's ``app`` module once and snapshots the result: every call's
fresh instance starts from that snapshot. :func:`orchard_sdk.export` then also runs the calls of
a pass that do no I/O on sample inputs, so that the snapshot holds an interpreter that has run
them — bytecode specialised, caches filled, lazily made objects made — instead of every
instance doing that work again on its first calls.

Meanwhile the host's imports do not exist. The SDK's ways out check :data:`active` and stay
inside: an HTTP request fails with a :class:`~orchard_sdk.http.TransportError`, logs and
reports are dropped. A plugin that bundles ``requests`` (imports
``orchard_sdk.requests_transport``) also has a few requests sent through the whole of it, each
answered in memory by the adapter and never by the SDK's client
(:func:`orchard_sdk.requests_transport.warm_up`): the first requests of every call would
otherwise do that work again.
"""

from __future__ import annotations

import contextlib
from typing import Iterator

#: True while the warm-up runs.
active = False


@contextlib.contextmanager
def running() -> Iterator[None]:
    """Marks the warm-up as running for the duration of the ``with`` block."""
    global active
    active = True
    try:
        yield
    finally:
        active = False
