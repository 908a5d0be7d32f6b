"""The typed actuator base class a plugin subclasses, and :class:`Raw`, its JSON-text face.

The contract of each method is the one written in ``wit/actuator.wit``; in short: every
method MUST be idempotent; ``create`` MUST NOT do anything fallible after the primary resource
exists; ``get_by_id`` returns ``None`` when the resource is gone; ``list_for_adoption`` returns
``None`` where adoption does not apply; ``delete`` SHOULD NOT fail when the resource is already
gone.
"""

from __future__ import annotations

import copy
import json
import traceback
from typing import Any, Generic, List, Optional, Tuple, TypeVar, Union

from . import log
from .codec import DecodeError, decode, encode
from .errors import Failure, InvalidConfiguration, Transient, Unrecoverable, from_exception
from .types import Availability, Description, Object, Resource, Status, json_text

S = TypeVar("S")
F = TypeVar("F")
T = TypeVar("T")


#: Compact JSON; made once (at build time, inside a component) rather than on every call.
_dumps = json.JSONEncoder(separators=(",", ":")).encode


class Actuator(Generic[S, F, T]):
    """Everything specific to one kind of external resource.

    Set the three types as class attributes (dataclasses, or leave them ``dict``):

    - ``spec_type``: ``spec.resource``;
    - ``filter_type``: ``spec.import.filter``;
    - ``state_type``: what the plugin remembers of an external resource (passed back on every
      call).

    An instance is made for every call: keep no state in it. Failures are raised
    (:class:`~orchard_sdk.Transient`, :class:`~orchard_sdk.InvalidConfiguration`,
    :class:`~orchard_sdk.Unrecoverable`) from anywhere in a method, helpers included; the
    methods that answer a :class:`Status` (``create``, ``delete``, ``run_reconciler``,
    ``available``) may also return the failure instead of raising it: the host sees the same
    status either way.

    ``filter_type`` may be left out (it is ``dict``) when the plugin has no import by filter
    (``filter_schema=None``): it is the SDK's alone, never part of the contract.
    """

    spec_type: Any = dict
    filter_type: Any = dict
    state_type: Any = dict

    def describe(self) -> Description:
        """The managed kind and its schemas. MUST be pure."""
        raise NotImplementedError("describe")

    def get_by_id(self, obj: Object[S], id: str) -> Optional[Resource[T]]:
        """The resource with this id; ``None`` when it does not exist."""
        raise NotImplementedError("get_by_id")

    def list_for_adoption(self, obj: Object[S]) -> Optional[List[Resource[T]]]:
        """Resources this object would have created; ``None`` where adoption does not apply."""
        return None

    def list_for_import(self, obj: Object[S], filter: F) -> List[Resource[T]]:
        """Resources matching an import filter, matched exactly."""
        raise InvalidConfiguration("this plugin does not support import by filter")

    def create(self, obj: Object[S]) -> Union[Resource[T], Status]:
        """Creates the primary resource (nothing fallible after it exists). Return a
        :class:`Status` with progress instead to create nothing yet (retried); raise (or
        return) a :class:`Failure` when it fails."""
        raise NotImplementedError("create")

    def delete(self, obj: Object[S], res: Resource[T]) -> Optional[Status]:
        """Deletes the resource; done (``None`` or ``Status.done()``) when it is already gone."""
        raise NotImplementedError("delete")

    def reconcilers(self, obj: Object[S], res: Resource[T]) -> List[str]:
        """Names of the post-create steps, in order."""
        return []

    def run_reconciler(self, name: str, obj: Object[S], res: Resource[T]) -> Optional[Status]:
        """Runs the post-create step ``name``; return ``Status.needs_refresh(...)`` after a change."""
        raise Unrecoverable(f"no reconciler named {name!r}")

    def available(
        self, obj: Object[S], res: Resource[T]
    ) -> Union[Availability, Tuple[Availability, Status]]:
        """Whether the resource is ready; available by default."""
        return Availability.AVAILABLE

    def observed(self, res: Resource[T]) -> Any:
        """``status.resource`` (a JSON value); the state itself by default."""
        return encode(res.state)


def _status(value: Union[None, Status, Failure]) -> Status:
    if value is None:
        return Status.done()
    if isinstance(value, Failure):
        return Status.failed(value)
    if not isinstance(value, Status):
        raise TypeError(f"expected a Status, got {type(value).__name__}")
    return value


def _report(function: str, e: BaseException) -> Failure:
    failure = from_exception(e)
    if not isinstance(e, Failure):
        log.error(f"{function}: unexpected exception\n{''.join(traceback.format_exception(e))}")
    return failure


class Raw:
    """The actuator contract over JSON text, exactly as it crosses the Wasm boundary.

    Objects carry ``spec`` as JSON text, resources ``state`` as JSON text. Every exception a
    plugin raises becomes the contract's failure value here: nothing escapes to trap the call.
    The export layer calls it from the generated bindings; unit tests may call it directly.
    """

    def __init__(self, actuator: Actuator) -> None:
        self.a = actuator

    # -- conversions -------------------------------------------------------------------------

    def _object(self, obj: Object) -> Object:
        if obj.spec is None:
            return obj
        spec = _decode(self.a.spec_type, obj.spec, "spec.resource", obj.name)  # text or value
        typed = copy.copy(obj)
        typed.spec = spec
        return typed

    def _resource(self, res: Resource) -> Resource:
        try:
            value = json.loads(res.state) if isinstance(res.state, str) else res.state
            state = decode(self.a.state_type, value, "state")
        except (DecodeError, ValueError) as e:
            raise Transient(f"state of external resource {res.id}: {e}") from None
        return Resource(res.id, state)

    @staticmethod
    def _raw(res: Any) -> Resource:
        if not isinstance(res, Resource):
            raise TypeError(f"expected a Resource, got {type(res).__name__}")
        if not isinstance(res.id, str) or not res.id:
            raise TypeError(f"a Resource needs a non-empty string id, got {res.id!r}")
        return Resource(res.id, _dumps(encode(res.state)))

    # -- the contract ------------------------------------------------------------------------

    def describe(self) -> Description:
        d = self.a.describe()
        return Description(
            name=d.name,
            group=d.group,
            version=d.version,
            kind=d.kind,
            plural=d.plural,
            resource_schema=json_text(d.resource_schema),
            observed_schema=json_text(d.observed_schema),
            filter_schema=None if d.filter_schema is None else json_text(d.filter_schema),
            dependencies=list(d.dependencies),
            needs_credentials=bool(d.needs_credentials),
        )

    def get_by_id(self, obj: Object, id: str) -> Optional[Resource]:
        """Raises :class:`Failure` only."""
        try:
            res = self.a.get_by_id(self._object(obj), id)
            return None if res is None else self._raw(res)
        except Exception as e:
            raise _report("get-by-id", e) from None

    def list_for_adoption(self, obj: Object) -> Optional[List[Resource]]:
        try:
            found = self.a.list_for_adoption(self._object(obj))
            return None if found is None else [self._raw(r) for r in found]
        except Exception as e:
            raise _report("list-for-adoption", e) from None

    def list_for_import(self, obj: Object, filter: str) -> List[Resource]:
        try:
            typed = self._object(obj)
            f = _decode(self.a.filter_type, filter, "spec.import.filter", obj.name)
            return [self._raw(r) for r in self.a.list_for_import(typed, f)]
        except Exception as e:
            raise _report("list-for-import", e) from None

    def create(self, obj: Object) -> Union[Resource, Status]:
        """A resource, or a status (progress or failure) when nothing was created."""
        try:
            out = self.a.create(self._object(obj))
            if isinstance(out, Failure):
                return Status.failed(out)
            if isinstance(out, Status):
                if out.is_done():
                    raise TypeError("create returned a done Status without a Resource")
                return out
            return self._raw(out)
        except Exception as e:
            return Status.failed(_report("create", e))

    def delete(self, obj: Object, res: Resource) -> Status:
        try:
            return _status(self.a.delete(self._object(obj), self._resource(res)))
        except Exception as e:
            return Status.failed(_report("delete", e))

    def reconcilers(self, obj: Object, res: Resource) -> List[str]:
        try:
            names = self.a.reconcilers(self._object(obj), self._resource(res))
            return [str(n) for n in names]
        except Exception as e:
            raise _report("reconcilers", e) from None

    def run_reconciler(self, name: str, obj: Object, res: Resource) -> Status:
        try:
            return _status(self.a.run_reconciler(name, self._object(obj), self._resource(res)))
        except Exception as e:
            return Status.failed(_report(f"run-reconciler {name}", e))

    def available(self, obj: Object, res: Resource) -> Tuple[Availability, Status]:
        try:
            out = self.a.available(self._object(obj), self._resource(res))
            if isinstance(out, Failure):
                return Availability.UNKNOWN, Status.failed(out)
            if isinstance(out, Availability):
                return out, Status.done()
            availability, status = out
            return availability, _status(status)
        except Exception as e:
            return Availability.UNKNOWN, Status.failed(_report("available", e))

    def observed(self, res: Resource) -> str:
        """JSON text. A state that cannot be read, or an exception, gives ``null``, which the
        host shows as an empty ``status.resource``."""
        try:
            return _dumps(encode(self.a.observed(self._resource(res))))
        except Exception as e:
            _report("observed", e)
            return "null"


def _decode(tp: Any, text: Any, path: str, name: str) -> Any:
    """``text`` is JSON text (as the host sends it) or, in a test, the JSON value itself."""
    if isinstance(text, str):
        try:
            value = json.loads(text)
        except ValueError as e:
            raise InvalidConfiguration(f"{name}: {path} is not JSON: {e}") from None
    else:
        value = text
    try:
        return decode(tp, value, path)
    except DecodeError as e:
        raise InvalidConfiguration(f"{name}: {e}") from None
