"""The values of the actuator contract (``wit/actuator.wit``, interface ``types``) as plain
Python: dataclasses and enums, independent of the generated bindings, so that a plugin can be
unit-tested with a plain ``python3``."""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass, field
from typing import Any, Dict, Generic, List, Optional, TypeVar, Union

from .errors import Failure, InvalidConfiguration, Transient

S = TypeVar("S")
T = TypeVar("T")


class WaitEvent(enum.Enum):
    """What a wait is for."""

    CREATION = "creation"
    READY = "ready"
    DELETION = "deletion"
    UPDATE = "update"


class Availability(enum.Enum):
    """Whether the external resource is ready for use."""

    AVAILABLE = "available"
    UNAVAILABLE = "unavailable"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class WaitingOnExternal:
    """Poll the external system again after ``poll_after_ms``."""

    event: WaitEvent
    message: str
    poll_after_ms: int


@dataclass(frozen=True)
class WaitingOnObject:
    """A watch on this Kubernetes object (same namespace) brings the reconcile back."""

    kind: str
    name: str
    event: WaitEvent


@dataclass(frozen=True)
class NeedsRefresh:
    """The external resource changed: the host fetches it again at once."""

    message: str


Progress = Union[WaitingOnExternal, WaitingOnObject, NeedsRefresh]


@dataclass
class Status:
    """Outcome of a step: done when it has neither progress nor failure."""

    progress: List[Progress] = field(default_factory=list)
    failure: Optional[Failure] = None

    @staticmethod
    def done() -> "Status":
        """Nothing left to do."""
        return Status()

    @staticmethod
    def needs_refresh(message: str) -> "Status":
        """The external resource was changed and must be fetched again."""
        return Status([NeedsRefresh(message)])

    @staticmethod
    def waiting_on_external(event: WaitEvent, message: str, poll_after_ms: int) -> "Status":
        """Poll the external system again after ``poll_after_ms`` milliseconds."""
        return Status([WaitingOnExternal(event, message, int(poll_after_ms))])

    @staticmethod
    def waiting_on_object(kind: str, name: str, event: WaitEvent) -> "Status":
        """Wait for another object of this namespace; its watch brings the reconcile back."""
        return Status([WaitingOnObject(kind, name, event)])

    @staticmethod
    def failed(failure: Failure) -> "Status":
        """A status carrying only a failure."""
        return Status([], failure)

    def is_done(self) -> bool:
        """Whether nothing is pending."""
        return not self.progress and self.failure is None

    def and_(self, other: "Status") -> "Status":
        """Both statuses together (the first failure wins)."""
        return Status(self.progress + other.progress, self.failure or other.failure)


@dataclass(frozen=True)
class Dependency:
    """A referenced object the host resolved for this call."""

    name: str
    kind: str
    object: str
    id: Optional[str] = None
    #: Its ``status.resource``, as JSON text.
    observed: Optional[str] = None

    def observed_json(self) -> Any:
        """``observed`` parsed (``None`` when absent)."""
        return None if self.observed is None else json.loads(self.observed)


@dataclass
class Object(Generic[S]):
    """The Kubernetes object being reconciled. ``spec`` is JSON text at the boundary and the
    plugin's own type (``Actuator.spec_type``) inside it; ``None`` for imported objects.

    A test builds one in a line: every field but ``name`` has a default (namespace
    ``default``), and credential values may be given as text, e.g.
    ``Object("www", spec=Spec(...), credentials={"apiKey": "k"}, status_id="x")``.
    :class:`Raw` also takes a spec given as a JSON value (a ``dict``) instead of text."""

    name: str
    namespace: str = "default"
    uid: str = ""
    generation: int = 0
    labels: Dict[str, str] = field(default_factory=dict)
    annotations: Dict[str, str] = field(default_factory=dict)
    spec: Optional[S] = None
    status_id: Optional[str] = None
    dependencies: List[Dependency] = field(default_factory=list)
    credentials: Dict[str, bytes] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if any(isinstance(v, str) for v in self.credentials.values()):
            self.credentials = {
                k: v.encode("utf-8") if isinstance(v, str) else v
                for k, v in self.credentials.items()
            }

    def require_spec(self) -> S:
        """The spec, or an ``InvalidConfiguration`` when the object has none."""
        if self.spec is None:
            raise InvalidConfiguration("spec.resource is required")
        return self.spec

    def dependency(self, name: str) -> Dependency:
        """The resolved dependency declared as ``name``."""
        for d in self.dependencies:
            if d.name == name:
                return d
        raise Transient(f"dependency {name} was not resolved")

    def dependency_id(self, name: str) -> str:
        """The id of the resolved dependency declared as ``name``."""
        d = self.dependency(name)
        if d.id is None:
            raise Transient(f"{d.kind} {d.object} has no status.id yet")
        return d.id

    def credential(self, key: str, default: Optional[str] = None) -> str:
        """A credentials value as text; ``default`` (when given) if the Secret has no such key."""
        raw = self.credentials.get(key)
        if raw is None:
            if default is not None:
                return default
            raise InvalidConfiguration(f"credentials Secret has no key {key!r}")
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise InvalidConfiguration(f"credentials key {key!r} is not UTF-8") from None


@dataclass
class Resource(Generic[T]):
    """One external resource. ``state`` is JSON text at the boundary and the plugin's own type
    (``Actuator.state_type``) inside it; the host stores ``id`` in ``status.id``. :class:`Raw`
    also takes a state given as a JSON value instead of text."""

    id: str
    state: T


@dataclass(frozen=True)
class DependencyDecl:
    """A field of ``spec.resource`` naming another object."""

    name: str
    field: str
    kind: str
    for_create: bool = True
    for_delete: bool = False
    guard_deletion: bool = True

    @staticmethod
    def guarded(name: str, field: str, kind: str, for_delete: bool = False) -> "DependencyDecl":
        """Needed for create (and delete, if asked), guarded against deletion: the common case."""
        return DependencyDecl(name, field, kind, True, for_delete, True)


@dataclass
class Description:
    """What the plugin manages. Schemas are OpenAPI v3 as Python values (dicts) or JSON text."""

    name: str
    group: str
    version: str
    kind: str
    plural: str
    resource_schema: Any
    observed_schema: Any
    filter_schema: Any = None
    dependencies: List[DependencyDecl] = field(default_factory=list)
    needs_credentials: bool = False

    def api_version(self, storage: bool) -> "ApiVersion":
        """The description's own version as an :class:`ApiVersion`, with the description's
        schemas: the version ``Actuator.versions`` MUST list, since every other method of the
        actuator works at it (the apiserver converts the others through ``convert``)."""
        return ApiVersion(
            name=self.version,
            resource_schema=self.resource_schema,
            observed_schema=self.observed_schema,
            filter_schema=self.filter_schema,
            storage=storage,
        )


@dataclass(frozen=True)
class Shortcuts:
    """What the plugin's external system guarantees, so that the host skips calls its generic
    flow makes to stay leak-safe on any system (WIT ``orchard:shortcuts``; see
    :meth:`Actuator.shortcuts`). Declare only what the system itself enforces: the conformance
    kit checks both.

    - ``create_refuses_duplicates``: the system refuses to create a resource whose identifying
      fields (those ``list_for_adoption`` matches on) an existing one has — ``create`` then
      answers a failure and changes nothing. The host skips ``list_for_adoption`` before a
      create and calls it only after a create fails; ``list_for_adoption`` MUST answer a list
      for every object the plugin can create. (A ``PUT`` that creates or replaces does not
      refuse: RabbitMQ's management API is such a system.)
    - ``delete_is_synchronous``: a ``delete`` that answers done has removed the resource
      (``get_by_id`` answers ``None`` from then on): the host releases the object without
      reading the resource back.
    - ``delete_by_id``: deleting needs only the resource's id, and a delete of an id whose
      resource is gone answers done: the host deletes an object by its ``status.id`` without
      reading the resource first, through :meth:`Actuator.delete_by_id`, which the plugin MUST
      implement. (RabbitMQ deletes a vhost by its name, and answers ``404`` for a gone one.)
    """

    create_refuses_duplicates: bool = False
    delete_is_synchronous: bool = False
    delete_by_id: bool = False


@dataclass(frozen=True)
class ApiVersion:
    """One API version of the kind (WIT ``conversion.api-version``, since 0.1.2). Schemas are
    OpenAPI v3 as Python values (dicts, e.g. ``schema_of(SpecV1alpha1)``) or JSON text, as in
    :class:`Description`; ``filter_schema=None``: no import by filter at this version. Exactly
    one version of the kind says ``storage=True``: the version objects are stored at."""

    name: str
    resource_schema: Any
    observed_schema: Any
    filter_schema: Any = None
    storage: bool = False


@dataclass
class Convertible:
    """The parts of one object that change shape between API versions (WIT
    ``conversion.convertible``); the host keeps the rest of the object (metadata,
    ``credentialsRef``, conditions, ``status.id``…) as it is.

    ``resource`` (``spec.resource``), ``filter`` (``spec.import.filter``) and ``observed``
    (``status.resource``) are parsed JSON values in ``Actuator.convert`` and JSON text at the
    boundary (:class:`Raw`); ``None``: the object has none (the host treats a JSON ``null``
    the same way). ``annotations`` are all the object's annotations: a conversion MAY keep
    what the other version cannot hold under keys of the kind's group (``<group>/…``), the
    only ones the host writes back."""

    resource: Any = None
    filter: Any = None
    observed: Any = None
    annotations: Dict[str, str] = field(default_factory=dict)


def json_text(value: Any) -> str:
    """A value as compact JSON text; text is passed through unchanged."""
    if isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"), sort_keys=True)
