"""The typed actuator base class a plugin subclasses, and :class:`Raw`, its JSON-text face.

The contract of each method is the one written in ``wit/actuator.wit``; in short: every
method MUST be idempotent; ``create`` MUST NOT do anything fallible after the primary resource
exists; ``get_by_id`` returns ``None`` when the resource is gone; ``list_for_adoption`` returns
``None`` where adoption does not apply; ``delete`` SHOULD NOT fail when the resource is already
gone. A kind with several API versions also overrides ``versions`` and ``convert`` (WIT
interface ``conversion``, exported by :func:`orchard_sdk.export_conversion`).
"""

from __future__ import annotations

import copy
import json
import re
import traceback
from typing import Any, Generic, List, Optional, Sequence, Tuple, TypeVar, Union

from . import log
from .codec import DecodeError, decode, encode
from .errors import Failure, InvalidConfiguration, Transient, Unrecoverable, from_exception
from .types import (
    ApiVersion,
    Availability,
    Convertible,
    Description,
    Object,
    Resource,
    Shortcuts,
    Status,
    json_text,
)

S = TypeVar("S")
F = TypeVar("F")
T = TypeVar("T")


#: Compact JSON; made once (at build time, inside a component) rather than on every call.
_dumps = json.JSONEncoder(separators=(",", ":")).encode
#: The same, refusing NaN and infinities (not JSON), for the documents ``convert`` answers: the
#: host would refuse the whole answer for one.
_strict_dumps = json.JSONEncoder(separators=(",", ":"), allow_nan=False).encode

#: At most this many API versions (the host's bound, wit/actuator.wit).
VERSIONS_MAX = 16
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")


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

    def delete_by_id(self, obj: Object[S], id: str) -> Optional[Status]:
        """Deletes the resource with this id, which nobody read first; done when no resource
        has it. Called instead of :meth:`delete` when the host deletes by id: a plugin that
        declares ``Shortcuts(delete_by_id=True)`` MUST implement it (the default raises an
        :class:`Unrecoverable` naming what is missing)."""
        raise Unrecoverable(
            f"this plugin declares the delete-by-id shortcut but does not implement "
            f"delete_by_id (asked to delete {id})"
        )

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

    # -- shortcuts (WIT package `orchard:shortcuts`) -----------------------------------------

    def shortcuts(self) -> Shortcuts:
        """The calls this plugin's external system lets the host skip (:class:`Shortcuts`); may
        also be a class attribute. MUST be pure (the SDK reads it once, while the component is
        built). Default: none — the generic flow, safe on any system. A plugin that declares
        some binds ``Shortcuts = export_shortcuts(MyActuator)`` in ``app.py``.
        """
        return Shortcuts()

    # -- several API versions (WIT interface `conversion`, since 0.1.2) ----------------------

    def versions(self) -> List[ApiVersion]:
        """Every API version of the kind, oldest first, when it has several (see
        docs/schema-evolution.md); may also be a class attribute (a list).

        - MUST be pure: the same answer every time, no I/O (the SDK reads it once, while the
          component is built).
        - MUST list ``describe().version`` with exactly the description's schemas
          (``self.describe().api_version(storage=…)`` gives it): that is the version the host
          watches and every other method sees; the apiserver converts the others through
          ``convert``.
        - Exactly one version says ``storage=True``; at most 16 versions; names are DNS-1123
          labels (``v1``, ``v1beta1``…).

        Default: ``[]`` — the kind has one version, the description's. A plugin that lists
        versions binds ``Conversion = export_conversion(MyActuator)`` in ``app.py``.
        """
        return []

    def convert(self, obj: Convertible, from_version: str, to_version: str) -> Convertible:
        """Converts one object's documents from ``from_version`` to ``to_version``: two
        different names ``versions`` lists (the SDK refuses any other pair, and answers the
        object as it is when both are the same, without calling this). ``obj`` holds parsed
        JSON values and a copy of the annotations (a ``dict``, the plugin's to change); return
        the object at ``to_version``, e.g. ``dataclasses.replace(obj, resource=changed)``.

        - MUST preserve every field: converting to another version and back MUST give the
          object that went in (:func:`orchard_sdk.check_round_trip` checks it in a unit
          test). What ``to_version`` cannot hold goes into an annotation under the kind's
          group (``<group>/…``), the only annotations the host writes back.
        - MUST NOT do I/O: the host denies every outbound request during the call.

        Raise failures as in every method (:class:`InvalidConfiguration` for a document the
        user must fix); any other exception becomes a ``Transient`` failure. A failure fails
        the apiserver's request for that object, naming the plugin, the object and the
        failure. Default: an ``Unrecoverable`` failure (one version: nothing to convert).
        """
        raise Unrecoverable(
            f"this plugin serves one API version (asked to convert {from_version} to {to_version})"
        )


def _no_state(state: Any) -> bool:
    """Whether a resource's state is what the host sends when it deletes by id: JSON ``null``
    (as text at the boundary, or ``None``)."""
    return state is None or (isinstance(state, str) and state.strip() == "null")


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
        """``delete``: by id when the plugin declares it and the host sent no state (JSON
        ``null``)."""
        try:
            if _no_state(res.state) and self.shortcuts().delete_by_id:
                return _status(self.a.delete_by_id(self._object(obj), res.id))
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

    # -- shortcuts ---------------------------------------------------------------------------

    def shortcuts(self) -> Shortcuts:
        """The actuator's declared shortcuts (none by default). WIT ``shortcuts`` has no failure
        to answer: a declaration that is not a :class:`Shortcuts` raises ``TypeError`` naming
        the actuator, which fails the build when :func:`orchard_sdk.export_shortcuts` reads it."""
        a = self.a
        declared = a.shortcuts() if callable(a.shortcuts) else a.shortcuts
        if declared is None:
            return Shortcuts()
        if not isinstance(declared, Shortcuts):
            raise TypeError(
                f"{type(a).__name__}.shortcuts: expected an orchard_sdk.Shortcuts, "
                f"got {type(declared).__name__}"
            )
        return declared

    # -- conversion --------------------------------------------------------------------------

    def versions(self) -> List[ApiVersion]:
        """The actuator's versions with their schemas as JSON text, checked against the
        contract (``[]``: one version). WIT ``versions`` has no failure to answer: a plugin
        error raises ``ValueError`` (or ``TypeError``) naming the actuator and the rule, which
        fails the build when :func:`orchard_sdk.export_conversion` reads them."""
        a = self.a
        owner = f"{type(a).__name__}.versions"
        listed = a.versions() if callable(a.versions) else a.versions
        if listed is None:
            return []
        if not isinstance(listed, (list, tuple)):
            raise TypeError(f"{owner} must be a list of ApiVersion, got {type(listed).__name__}")
        if len(listed) == 0:
            return []
        if len(listed) > VERSIONS_MAX:
            raise ValueError(f"{owner}: {len(listed)} versions listed, at most {VERSIONS_MAX}")
        out: List[ApiVersion] = []
        for v in listed:
            if not isinstance(v, ApiVersion):
                raise TypeError(f"{owner} must list ApiVersion values, got {type(v).__name__}")
            if not isinstance(v.name, str) or not _DNS_LABEL.fullmatch(v.name):
                raise ValueError(
                    f"{owner}: version {v.name!r} must be a DNS-1123 label (e.g. v1beta1)"
                )
            if any(seen.name == v.name for seen in out):
                raise ValueError(f"{owner}: version {v.name} is listed twice")
            if not isinstance(v.storage, bool):
                raise TypeError(
                    f"{owner}: version {v.name}: storage must be a bool, got {v.storage!r}"
                )
            schema = lambda field: _schema_text(owner, v.name, field, getattr(v, field))  # noqa: E731
            out.append(
                ApiVersion(
                    name=v.name,
                    resource_schema=schema("resource_schema"),
                    observed_schema=schema("observed_schema"),
                    filter_schema=None if v.filter_schema is None else schema("filter_schema"),
                    storage=v.storage,
                )
            )
        storage = [v.name for v in out if v.storage]
        if len(storage) != 1:
            raise ValueError(
                f"{owner}: exactly one version must be the storage version, {len(storage)} are"
                + (f" ({', '.join(storage)})" if storage else "")
            )
        d = self.describe()
        at = next((v for v in out if v.name == d.version), None)
        if at is None:
            raise ValueError(
                f"{owner}: the description's version {d.version} is not listed "
                f"(every other method works at it): list self.describe().api_version(storage=...)"
            )
        if not (
            _same_json(at.resource_schema, d.resource_schema)
            and _same_json(at.observed_schema, d.observed_schema)
            and _same_json(at.filter_schema, d.filter_schema)
        ):
            raise ValueError(
                f"{owner}: version {d.version} lists other schemas than the description's, which "
                f"is at that version: list self.describe().api_version(storage=...)"
            )
        return out

    def convert(
        self,
        obj: Convertible,
        from_version: str,
        to_version: str,
        listed: Optional[Sequence[str]] = None,
    ) -> Convertible:
        """``obj`` (its documents JSON text, or ``None``) converted from ``from_version`` to
        ``to_version``, its documents JSON text. Raises :class:`Failure` only: an
        ``Unrecoverable`` one for a version the kind does not list, an ``InvalidConfiguration``
        one naming the document that is not JSON. ``listed``: the kind's version names, when
        the caller has read them already (the export reads them once, at build time)."""
        try:
            names = [v.name for v in self.versions()] if listed is None else list(listed)
            if not names:
                raise Unrecoverable(
                    "this plugin serves one API version "
                    f"(asked to convert {from_version} to {to_version})"
                )
            if from_version not in names or to_version not in names:
                raise Unrecoverable(
                    f"this plugin serves versions {', '.join(names)}: "
                    f"cannot convert {from_version} to {to_version}"
                )
            if from_version == to_version:
                # Nothing to convert: the object as it came, byte for byte.
                return Convertible(obj.resource, obj.filter, obj.observed, dict(obj.annotations))
            parsed = Convertible(
                resource=_document(obj.resource, "spec.resource", from_version),
                filter=_document(obj.filter, "spec.import.filter", from_version),
                observed=_document(obj.observed, "status.resource", from_version),
                # The plugin's own copy: what it changes in place is not the caller's.
                annotations=dict(obj.annotations),
            )
            out = self.a.convert(parsed, from_version, to_version)
            if not isinstance(out, Convertible):
                raise TypeError(f"convert must return a Convertible, got {type(out).__name__}")
            annotations = out.annotations
            if not isinstance(annotations, dict) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in annotations.items()
            ):
                raise TypeError(
                    f"convert must return annotations as a dict of str to str, got {annotations!r}"
                )
            text = lambda v: None if v is None else _strict_dumps(encode(v))  # noqa: E731
            return Convertible(
                text(out.resource), text(out.filter), text(out.observed), dict(annotations)
            )
        except Exception as e:
            raise _report(f"convert {from_version} to {to_version}", e) from None


def _schema_text(owner: str, version: str, field: str, schema: Any) -> str:
    """A version's schema as JSON text, which MUST be a JSON object."""
    try:
        text = json_text(schema)
        value = json.loads(text)
    except (TypeError, ValueError) as e:
        raise ValueError(f"{owner}: version {version}: {field} is not JSON: {e}") from None
    if not isinstance(value, dict):
        raise ValueError(f"{owner}: version {version}: {field} must be a JSON object")
    return text


def _same_json(text: Optional[str], schema: Any) -> bool:
    """Whether a version's schema (text, or ``None``) is the description's (a value or text)."""
    if text is None or schema is None:
        return text is None and schema is None
    return json.loads(text) == json.loads(json_text(schema))


def _document(text: Optional[str], field: str, version: str) -> Any:
    """One document of a :class:`Convertible`, parsed; ``None`` when the object has none."""
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError as e:
        raise InvalidConfiguration(f"{field} at version {version} is not JSON: {e}") from None


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
