"""What a plugin reports beside its answers (``orchard:actuator/report``, WIT 0.1.1)::

    from orchard_sdk import report
    report.connection_detail("password", password)        # str (UTF-8) or bytes
    report.drift("kind", "Native", "Master")               # JSON-serialisable values
    d = report.diff(observed, desired, ["tags", "settings.ttl"])
    if d:                                                  # change the resource back, then
        d.report()

The host writes the connection details of a pass into the Secret named by
``spec.writeConnectionSecretTo.name`` (owned by the object), never into status, Events or
logs; it records drifts in an Event ``DriftCorrected`` and in ``status.drift``.

Outside a component (unit tests) nothing is sent: reports are appended to the module-level
lists :data:`connection_details` and :data:`drifts` (at most :data:`NATIVE_LIMIT` each), which
:func:`take` returns and empties.
"""

from __future__ import annotations

import json
from typing import Any, Iterable, List, NamedTuple, Optional, Tuple, Union

from . import _warmup
from .codec import encode

try:  # inside a component: the generated bindings of `orchard:actuator/report`
    from wit_world.imports import report as _wit
except ImportError:  # natively
    _wit = None


class Drift(NamedTuple):
    """One drift: ``observed`` and ``desired`` as JSON text, ``None`` for absent."""

    field: str
    observed: Optional[str]
    desired: Optional[str]
    sensitive: bool = False


class Reports(NamedTuple):
    """What :func:`take` returns."""

    connection_details: List[Tuple[str, bytes]]
    drifts: List[Drift]

    def detail(self, key: str) -> Optional[str]:
        """The last value reported for ``key`` (as the host keeps it), as text."""
        for k, v in reversed(self.connection_details):
            if k == key:
                return v.decode("utf-8", "replace")
        return None


NATIVE_LIMIT = 1024
#: Natively: every ``(key, value)`` reported since the last :func:`take`.
connection_details: List[Tuple[str, bytes]] = []
#: Natively: every :class:`Drift` reported since the last :func:`take`.
drifts: List[Drift] = []


def _json(value: Any) -> Optional[str]:
    """JSON text of ``value`` (dataclasses as their camelCase objects); ``None`` stays absent,
    as does what does not serialise."""
    if value is None:
        return None
    try:
        return json.dumps(encode(value), separators=(",", ":"), sort_keys=False)
    except (TypeError, ValueError):
        return None


def connection_detail(key: str, value: Union[str, bytes]) -> None:
    """Reports a connection detail: ``key`` a Secret data key, ``value`` text (UTF-8) or bytes."""
    if isinstance(value, str):
        value = value.encode("utf-8")
    elif not isinstance(value, (bytes, bytearray)):
        raise TypeError(f"connection detail {key}: the value must be str or bytes")
    if _warmup.active:
        return
    if _wit is not None:
        _wit.connection_detail(key, bytes(value))
    elif len(connection_details) < NATIVE_LIMIT:
        connection_details.append((key, bytes(value)))


def _send(d: Drift) -> None:
    if _warmup.active:
        return
    if _wit is not None:
        _wit.drift(d.field, d.observed, d.desired, d.sensitive)
    elif len(drifts) < NATIVE_LIMIT:
        drifts.append(d)


def drift(field: str, observed: Any, desired: Any, sensitive: bool = False) -> None:
    """Reports a drift: ``field`` was ``observed`` and was changed back to ``desired`` (JSON-
    serialisable values, ``None``: absent). ``sensitive`` values are masked by the host."""
    _send(Drift(field, _json(observed), _json(desired), sensitive))


class Diff(list):
    """The :class:`Drift` entries of the fields that differ; :meth:`report` sends them (nothing
    is sent before). Empty (false) when observed and desired agree."""

    def field(self, field: str, observed: Any, desired: Any, sensitive: bool = False) -> "Diff":
        """Adds ``field`` when ``observed != desired`` (compared as JSON values); chainable."""
        if encode(observed) != encode(desired):
            self.append(Drift(field, _json(observed), _json(desired), sensitive))
        return self

    @property
    def fields(self) -> List[str]:
        """The names of the fields that differ, in order."""
        return [d.field for d in self]

    def report(self) -> int:
        """Reports every difference as a drift; returns how many."""
        for d in self:
            _send(d)
        return len(self)


_MISSING = object()


def _lookup(value: Any, path: str) -> Any:
    for key in path.split("."):
        if isinstance(value, dict):
            value = value.get(key, _MISSING)
        else:
            value = getattr(value, key, _MISSING)
        if value is _MISSING:
            return None
    return value


def diff(observed: Any, desired: Any, fields: Iterable[str], sensitive: Iterable[str] = ()) -> Diff:
    """Compares ``observed`` and ``desired`` (dicts or dataclasses) on each of ``fields``, a
    dotted path (``settings.ttl``; dataclass attributes by their Python name); a field missing on
    one side is absent there. ``sensitive`` names the fields the host masks. Reports nothing
    until :meth:`Diff.report`."""
    masked = set(sensitive)
    d = Diff()
    for f in fields:
        d.field(f, _lookup(observed, f), _lookup(desired, f), f in masked)
    return d


def take() -> Reports:
    """Natively: what was reported since the last call, and empties it (in a component:
    nothing)."""
    got = Reports(list(connection_details), list(drifts))
    connection_details.clear()
    drifts.clear()
    return got
