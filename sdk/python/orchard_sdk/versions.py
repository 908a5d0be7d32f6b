"""Helpers for a kind with several API versions (WIT interface ``conversion``, since 0.1.2), for
a plugin's unit tests: the same checks the component runs, natively.

    class Upstream(Actuator):
        def versions(self):
            return [V1ALPHA1, self.describe().api_version(storage=True)]

        def convert(self, obj, from_version, to_version):
            ...

    check_versions(Upstream)                      # the contract's rules on versions()
    at_beta = check_round_trip(Upstream, Convertible(resource={...}), "v1alpha1", "v1beta1")

The component itself is exported with :func:`orchard_sdk.export_conversion` (see
docs/writing-a-plugin/python.md, "Several API versions").
"""

from __future__ import annotations

import json
from typing import Any, List, Optional, Type, Union

from .actuator import Actuator, Raw
from .errors import Failure
from .types import ApiVersion, Convertible

__all__ = ["check_versions", "check_round_trip"]


def _instance(actuator: Union[Actuator, Type[Actuator]]) -> Actuator:
    return actuator() if isinstance(actuator, type) else actuator


def check_versions(actuator: Union[Actuator, Type[Actuator]]) -> List[ApiVersion]:
    """The actuator's versions (schemas as JSON text) after the checks the component runs
    while it is built: at most 16, DNS-1123 names listed once, schemas JSON objects, exactly
    one storage version, the description's version listed with the description's schemas.
    Raises ``ValueError`` (or ``TypeError``) naming the rule a version breaks."""
    return Raw(_instance(actuator)).versions()


def _text(doc: Any) -> Optional[str]:
    return None if doc is None else json.dumps(doc)


def _parsed(c: Convertible) -> Convertible:
    load = lambda t: None if t is None else json.loads(t)  # noqa: E731
    return Convertible(load(c.resource), load(c.filter), load(c.observed), dict(c.annotations))


def check_round_trip(
    actuator: Union[Actuator, Type[Actuator]],
    obj: Convertible,
    from_version: str,
    to_version: str,
) -> Convertible:
    """Converts ``obj`` (parsed JSON documents, as ``Actuator.convert`` sees them) from
    ``from_version`` to ``to_version`` and back, through the same checks as the component's
    calls, and returns the object at ``to_version`` (parsed). Raises ``AssertionError`` saying
    what differs when the object that comes back is not the one that went in (documents
    compared as JSON values, annotations key by key), or naming the failure of either
    conversion."""
    raw = Raw(_instance(actuator))
    sent = Convertible(
        _text(obj.resource), _text(obj.filter), _text(obj.observed), dict(obj.annotations)
    )
    try:
        there = raw.convert(sent, from_version, to_version)
    except Failure as f:
        raise AssertionError(f"convert {from_version} to {to_version}: {f!r}") from None
    try:
        back = _parsed(raw.convert(there, to_version, from_version))
    except Failure as f:
        raise AssertionError(f"convert {to_version} back to {from_version}: {f!r}") from None
    diffs = []
    for field in ("resource", "filter", "observed"):
        went, came = getattr(_parsed(sent), field), getattr(back, field)
        if went != came:
            diffs.append(f"{field} went {_shown(went)}, came back {_shown(came)}")
    for key in sorted(set(obj.annotations) | set(back.annotations)):
        went, came = obj.annotations.get(key), back.annotations.get(key)
        if went != came:
            diffs.append(f"annotation {key} went {_shown(went)}, came back {_shown(came)}")
    if diffs:
        raise AssertionError(
            f"{from_version} to {to_version} and back is not the object that went in: "
            + "; ".join(diffs)
        )
    return _parsed(there)


def _shown(value: Any) -> str:
    return "absent" if value is None else json.dumps(value, sort_keys=True)
