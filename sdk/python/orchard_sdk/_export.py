"""The glue between componentize-py's generated bindings and :class:`~orchard_sdk.actuator.Raw`:
one export class for every :class:`~orchard_sdk.Actuator`, and one more for the
``orchard:actuator/conversion`` export of a kind with several API versions. Used through
:func:`orchard_sdk.export` and :func:`orchard_sdk.export_conversion`."""

from __future__ import annotations

import gc
import sys
import json
from typing import Any, List, Optional, Tuple, Type

from . import _warmup
from .actuator import Actuator, Raw
from .codec import prepare, sample
from .errors import Failure
from .types import (
    Availability,
    Convertible,
    Dependency,
    Description,
    NeedsRefresh,
    Object,
    Resource,
    Shortcuts,
    Status,
    WaitEvent,
    WaitingOnExternal,
    WaitingOnObject,
)

try:  # inside a component
    from componentize_py_types import Err
    from wit_world import exports as _exports
    from wit_world.imports import orchard_actuator_types as wit

    _Protocol: Any = _exports.Actuator
except ImportError:  # natively: the class can be made, not called
    wit = None
    _Protocol = object

try:  # inside a component of world versioned-actuator-plugin
    from wit_world.exports import conversion as wit_conversion

    _ConversionProtocol: Any = _exports.Conversion
except ImportError:  # natively, or world actuator-plugin (one version)
    wit_conversion = None
    _ConversionProtocol = object

try:  # inside a component of world shortcut-actuator-plugin
    from wit_world.exports import shortcuts as wit_shortcuts

    _ShortcutsProtocol: Any = _exports.Shortcuts
except ImportError:  # natively, or a world without orchard:shortcuts
    wit_shortcuts = None
    _ShortcutsProtocol = object


def _object(o: Any) -> Object:
    return Object(
        name=o.name,
        namespace=o.namespace,
        uid=o.uid,
        generation=o.generation,
        labels=dict(o.labels),
        annotations=dict(o.annotations),
        spec=o.spec,
        status_id=o.status_id,
        dependencies=[
            Dependency(d.name, d.kind, d.object, d.id, d.observed) for d in o.dependencies
        ],
        credentials={k: bytes(v) for k, v in o.credentials},
    )


def _resource(r: Any) -> Resource:
    return Resource(r.id, r.state)


def _external(r: Resource) -> Any:
    return wit.ExternalResource(r.id, r.state)


def _failure(f: Failure) -> Any:
    if f.kind == "invalid-configuration":
        return wit.Failure_InvalidConfiguration(f.message)
    if f.kind == "unrecoverable":
        return wit.Failure_Unrecoverable(f.message)
    return wit.Failure_Transient(f.message)


_EVENTS = {
    WaitEvent.CREATION: "CREATION",
    WaitEvent.READY: "READY",
    WaitEvent.DELETION: "DELETION",
    WaitEvent.UPDATE: "UPDATE",
}


def _event(e: WaitEvent) -> Any:
    return getattr(wit.WaitEvent, _EVENTS[e])


def _status(s: Status) -> Any:
    progress = []
    for p in s.progress:
        if isinstance(p, WaitingOnExternal):
            ms = max(0, min(int(p.poll_after_ms), 2**32 - 1))
            progress.append(
                wit.Progress_WaitingOnExternal(wit.ExternalWait(_event(p.event), p.message, ms))
            )
        elif isinstance(p, WaitingOnObject):
            progress.append(
                wit.Progress_WaitingOnObject(
                    wit.ObjectWait(wit.ObjectRef(p.kind, p.name), _event(p.event))
                )
            )
        elif isinstance(p, NeedsRefresh):
            progress.append(wit.Progress_NeedsRefresh(p.message))
    return wit.Status(progress, None if s.failure is None else _failure(s.failure))


def _description(d: Description) -> Any:
    return wit.Description(
        name=d.name,
        group=d.group,
        version=d.version,
        kind=d.kind,
        plural=d.plural,
        resource_schema=d.resource_schema,
        filter_schema=d.filter_schema,
        observed_schema=d.observed_schema,
        dependencies=[
            wit.DependencyDecl(x.name, x.field, x.kind, x.for_create, x.for_delete, x.guard_deletion)
            for x in d.dependencies
        ],
        needs_credentials=d.needs_credentials,
    )


_AVAILABILITY = {
    Availability.AVAILABLE: "AVAILABLE",
    Availability.UNAVAILABLE: "UNAVAILABLE",
    Availability.UNKNOWN: "UNKNOWN",
}


#: Bytes of heap grown at build time for the calls to allocate from (see `export`).
HEAP_RESERVE = 8 << 20


def export(actuator: Type[Actuator], *, warm_up: bool = True) -> type:
    """The class componentize-py exports for ``actuator``. Bind it to the name ``Actuator`` in
    the plugin's ``app`` module::

        Actuator = orchard_sdk.export(Vhost)

    While the component is built, ``reconcilers``, ``available`` and ``observed`` run a few
    times on sample inputs made from the plugin's types, with no way out (HTTP fails, logs and
    reports are dropped), so that every instance starts warm (:mod:`orchard_sdk._warmup`);
    when the plugin bundles ``requests``, a few requests through it answered in memory too.
    They MUST NOT leave module-level state a later call relies on; ``warm_up=False`` skips it.
    """

    # Resolved now, at build time: the hints become part of the component's snapshot.
    for tp in (actuator.spec_type, actuator.filter_type, actuator.state_type):
        prepare(tp)
    if wit is not None and wit_conversion is None:
        # Built for world actuator-plugin (app.py binds no `Conversion`): versions the actuator
        # lists would silently not be served, so the build fails instead.
        listed = Raw(actuator()).versions()
        if listed:
            raise RuntimeError(
                f"{actuator.__name__} lists API versions ({', '.join(v.name for v in listed)}) but "
                f"app.py binds no `Conversion`: add `Conversion = export_conversion("
                f"{actuator.__name__})` so that sdk/python/build.sh builds world "
                "versioned-actuator-plugin"
            )
    if wit is not None and wit_shortcuts is None and Raw(actuator()).shortcuts() != Shortcuts():
        # Built without orchard:shortcuts (app.py binds no `Shortcuts`): the declared
        # shortcuts would silently not be used, so the build fails instead.
        raise RuntimeError(
            f"{actuator.__name__} declares shortcuts but app.py binds no `Shortcuts`: add "
            f"`Shortcuts = export_shortcuts({actuator.__name__})` (and `Conversion = "
            f"export_conversion({actuator.__name__})`) so that sdk/python/build.sh builds world "
            "shortcut-actuator-plugin"
        )

    def raw() -> Raw:
        return Raw(actuator())

    class Exported(_Protocol):  # type: ignore[misc, valid-type]
        def describe(self) -> Any:
            return _description(raw().describe())

        def get_by_id(self, obj: Any, id: str) -> Any:
            try:
                res = raw().get_by_id(_object(obj), id)
            except Failure as f:
                raise Err(_failure(f)) from None
            return None if res is None else _external(res)

        def list_for_adoption(self, obj: Any) -> Optional[List[Any]]:
            try:
                found = raw().list_for_adoption(_object(obj))
            except Failure as f:
                raise Err(_failure(f)) from None
            return None if found is None else [_external(r) for r in found]

        def list_for_import(self, obj: Any, filter: str) -> List[Any]:
            try:
                found = raw().list_for_import(_object(obj), filter)
            except Failure as f:
                raise Err(_failure(f)) from None
            return [_external(r) for r in found]

        def create(self, obj: Any) -> Any:
            out = raw().create(_object(obj))
            if isinstance(out, Status):
                raise Err(_status(out))
            return _external(out)

        def delete(self, obj: Any, res: Any) -> Any:
            return _status(raw().delete(_object(obj), _resource(res)))

        def reconcilers(self, obj: Any, res: Any) -> List[str]:
            try:
                return raw().reconcilers(_object(obj), _resource(res))
            except Failure as f:
                raise Err(_failure(f)) from None

        def run_reconciler(self, name: str, obj: Any, res: Any) -> Any:
            return _status(raw().run_reconciler(name, _object(obj), _resource(res)))

        def available(self, obj: Any, res: Any) -> Tuple[Any, Any]:
            a, s = raw().available(_object(obj), _resource(res))
            return getattr(wit.Availability, _AVAILABILITY[a]), _status(s)

        def observed(self, res: Any) -> str:
            return raw().observed(_resource(res))

    Exported.__name__ = Exported.__qualname__ = "Actuator"
    Exported.__doc__ = f"componentize-py export of {actuator.__name__}"
    if warm_up and wit is not None:
        _warm_up(Exported(), actuator)
    # Everything alive now is in the snapshot every call starts from: keep the collector from
    # walking it (each call is a fresh instance; its own garbage is still collected).
    gc.collect()
    gc.freeze()
    # Grow the heap now and free it: the memory stays in the allocator, and in the snapshot,
    # so that a call allocates from it instead of growing the instance's linear memory, which
    # costs the host a system call and fresh pages every time (milliseconds per call).
    reserve = bytearray(HEAP_RESERVE)
    del reserve
    return Exported


def export_conversion(actuator: Type[Actuator]) -> type:
    """The class componentize-py exports as ``orchard:actuator/conversion`` for ``actuator``'s
    ``versions`` and ``convert``. Bind it to the name ``Conversion`` in the plugin's ``app``
    module, beside ``Actuator``::

        Actuator = orchard_sdk.export(Upstream)
        Conversion = orchard_sdk.export_conversion(Upstream)

    ``sdk/python/build.sh`` builds world ``versioned-actuator-plugin`` for a plugin whose
    ``app.py`` binds ``Conversion`` at its top level, world ``actuator-plugin`` otherwise.

    The versions are read and checked once, now (while the component is built, or natively
    when a test imports ``app``): a list that breaks the contract raises ``ValueError`` naming
    the rule, which fails the build. ``convert`` runs through :meth:`Raw.convert`: a version
    the kind does not list is an ``Unrecoverable`` failure naming it, a document that is not
    JSON an ``InvalidConfiguration`` one naming the field.
    """
    listed = Raw(actuator()).versions()
    names = [v.name for v in listed]

    class Exported(_ConversionProtocol):  # type: ignore[misc, valid-type]
        def versions(self) -> List[Any]:
            return [
                wit_conversion.ApiVersion(
                    v.name, v.resource_schema, v.filter_schema, v.observed_schema, v.storage
                )
                for v in listed
            ]

        def convert(self, obj: Any, from_: str, to: str) -> Any:
            c = Convertible(obj.resource, obj.filter, obj.observed, dict(obj.annotations))
            try:
                out = Raw(actuator()).convert(c, from_, to, listed=names)
            except Failure as f:
                raise Err(_failure(f)) from None
            return wit_conversion.Convertible(
                out.resource, out.filter, out.observed, list(out.annotations.items())
            )

    Exported.__name__ = Exported.__qualname__ = "Conversion"
    Exported.__doc__ = f"componentize-py export of {actuator.__name__}'s API versions"
    #: The checked versions (schemas as JSON text), for tests.
    Exported.listed = listed  # type: ignore[attr-defined]
    return Exported


def export_shortcuts(actuator: Type[Actuator]) -> type:
    """The class componentize-py exports as ``orchard:shortcuts/shortcuts`` for
    ``actuator.shortcuts()``. Bind it to the name ``Shortcuts`` in the plugin's ``app`` module,
    beside ``Actuator`` and ``Conversion`` (world ``shortcut-actuator-plugin`` includes the
    ``conversion`` export; a kind with one version lists none)::

        Actuator = orchard_sdk.export(Vhost)
        Conversion = orchard_sdk.export_conversion(Vhost)
        Shortcuts = orchard_sdk.export_shortcuts(Vhost)

    ``sdk/python/build.sh`` builds world ``shortcut-actuator-plugin`` for a plugin whose
    ``app.py`` binds ``Shortcuts`` at its top level. The shortcuts are read and checked once,
    now (while the component is built, or natively when a test imports ``app``).
    """
    declared = Raw(actuator()).shortcuts()

    class Exported(_ShortcutsProtocol):  # type: ignore[misc, valid-type]
        def shortcuts(self) -> Any:
            flags = wit_shortcuts.Shortcut(0)
            if declared.create_refuses_duplicates:
                flags |= wit_shortcuts.Shortcut.CREATE_REFUSES_DUPLICATES
            if declared.delete_is_synchronous:
                flags |= wit_shortcuts.Shortcut.DELETE_IS_SYNCHRONOUS
            if declared.delete_by_id:
                flags |= wit_shortcuts.Shortcut.DELETE_BY_ID
            return flags

    Exported.__name__ = Exported.__qualname__ = "Shortcuts"
    Exported.__doc__ = f"componentize-py export of {actuator.__name__}'s shortcuts"
    #: The checked shortcuts, for tests.
    Exported.declared = declared  # type: ignore[attr-defined]
    return Exported


#: How many times the warm-up runs each call (CPython specialises a function's bytecode from
#: its second run).
WARM_UP_ROUNDS = 3


def samples(actuator: Type[Actuator]) -> Tuple[str, str]:
    """The spec and the state the warm-up calls get, as JSON text: every field filled
    (:func:`orchard_sdk.codec.sample`)."""
    return (
        json.dumps(sample(actuator.spec_type)),
        json.dumps(sample(actuator.state_type)),
    )


def _warm_up(exported: Any, actuator: Type[Actuator]) -> None:
    """Runs the calls of a pass that do no I/O — ``reconcilers``, ``available``, ``observed``
    — :data:`WARM_UP_ROUNDS` times on sample inputs while componentize-py builds the
    component (:mod:`orchard_sdk._warmup`). Their answers are thrown away, failures included:
    the run only warms the interpreter up."""
    spec, state = samples(actuator)
    obj = wit.ManagedObject(
        name="sample",
        namespace="sample",
        uid="",
        generation=1,
        labels=[],
        annotations=[],
        spec=spec,
        status_id="sample",
        dependencies=[],
        credentials=[],
    )
    res = wit.ExternalResource("sample", state)
    calls = (
        lambda: exported.reconcilers(obj, res),
        lambda: exported.available(obj, res),
        lambda: exported.observed(res),
    )
    with _warmup.running():
        for _ in range(WARM_UP_ROUNDS):
            for call in calls:
                try:
                    call()
                except Exception:  # noqa: BLE001 - a failure (an `Err`) or a bug: both only warm
                    pass
        # requests, when the plugin bundles it: its first requests' work, done here once.
        requests_transport = sys.modules.get("orchard_sdk.requests_transport")
        if requests_transport is not None:
            requests_transport.warm_up(WARM_UP_ROUNDS)
