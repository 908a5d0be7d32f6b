"""OpenAPI v3 schemas derived from the dataclasses the codec decodes (``spec_type``,
``filter_type``), so that what the CRD validates and what the plugin decodes cannot drift apart.

    @dataclass
    class VhostSpec:
        name: str = field(metadata={"schema": {"minLength": 1, "maxLength": 255}})
        tags: List[str] = field(default_factory=list, metadata={"schema": {"maxItems": 32}})
        max_queues: Optional[int] = field(default=None, metadata={"schema": {"minimum": 0}})

    schema_of(VhostSpec) == {
        "type": "object", "required": ["name"],
        "properties": {
            "name": {"type": "string", "minLength": 1, "maxLength": 255},
            "tags": {"type": "array", "maxItems": 32, "items": {"type": "string"}},
            "maxQueues": {"type": "integer", "minimum": 0},
        },
    }

The rules are the codec's (:mod:`orchard_sdk.codec`):

- a property per field, named by its JSON key (camelCase, or ``field(metadata={"json": …})``);
- ``required``: the fields without a default that are not ``Optional`` (the ones whose absence
  the codec refuses);
- ``str`` string, ``int`` integer, ``float`` number, ``bool`` boolean, an ``enum.Enum`` a
  string (or integer) with its values as ``enum``, ``List[X]`` an array of X, ``Dict[str, X]``
  an object of X (``additionalProperties``), a nested dataclass an object; ``Any``, ``dict``
  and ``Dict[str, Any]`` an object that keeps unknown fields
  (``x-kubernetes-preserve-unknown-fields``); ``Optional[X]`` is X;
- a class with ``__orchard_allow_unknown__ = True`` keeps unknown fields too.

Nothing is guessed beyond the types: defaults are not copied (the apiserver would apply them,
and the codec already does), constraints and Kubernetes extensions (``minLength``, ``enum``,
``x-kubernetes-validations``…) come from the field's ``metadata={"schema": {...}}``, merged
over what the type gives, and a class's ``__orchard_schema__`` dict is merged over its object.
:func:`immutable` is the usual CEL rule.
"""

from __future__ import annotations

import dataclasses
import enum
import typing
from typing import Any, Dict, List, Optional

from .codec import _hints, _optional, json_key

__all__ = ["schema_of", "immutable"]

_PRESERVE = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}


def immutable(what: Optional[str] = None) -> Dict[str, Any]:
    """``{"x-kubernetes-validations": [self == oldSelf]}``, for a field's ``schema`` metadata;
    the message is ``"<what> is immutable"`` (``"immutable"`` without ``what``)."""
    message = f"{what} is immutable" if what else "immutable"
    return {"x-kubernetes-validations": [{"rule": "self == oldSelf", "message": message}]}


def schema_of(tp: Any) -> Dict[str, Any]:
    """The OpenAPI v3 schema of a dataclass (or of any annotation the codec supports)."""
    return _schema(tp, ())


def _schema(tp: Any, seen: tuple) -> Dict[str, Any]:
    if tp is Any or tp is object:
        return dict(_PRESERVE)
    is_optional, inner = _optional(tp)
    if is_optional:
        return _schema(inner, seen)
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        if tp in seen:
            raise TypeError(f"{tp.__name__} contains itself: a CRD schema cannot be recursive")
        return _object(tp, seen + (tp,))
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        values = [m.value for m in tp]
        kind = "integer" if all(isinstance(v, int) and not isinstance(v, bool) for v in values) else "string"
        return {"type": kind, "enum": values}
    if tp is bool:
        return {"type": "boolean"}
    if tp is int:
        return {"type": "integer"}
    if tp is float:
        return {"type": "number"}
    if tp is str:
        return {"type": "string"}
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (list, typing.List) or tp is list:
        return {"type": "array", "items": _schema(args[0] if args else Any, seen)}
    if origin in (dict, typing.Dict) or tp is dict:
        value = args[1] if len(args) == 2 else Any
        if value is Any or value is object:
            return dict(_PRESERVE)
        return {"type": "object", "additionalProperties": _schema(value, seen)}
    raise TypeError(f"no schema for the annotation {tp!r}")


def _merge(base: Dict[str, Any], extra: Dict[str, Any]) -> Dict[str, Any]:
    """``extra`` over ``base``; a dict over a dict (``items``, ``additionalProperties``) is merged
    the same way, anything else replaced."""
    out = dict(base)
    for k, v in extra.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def _object(cls: type, seen: tuple) -> Dict[str, Any]:
    hints = _hints(cls)
    required: List[str] = []
    properties: Dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        ftype = hints.get(f.name, Any)
        key = json_key(f)
        no_default = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        if no_default and not _optional(ftype)[0]:
            required.append(key)
        prop = _schema(ftype, seen)
        properties[key] = _merge(prop, f.metadata.get("schema") or {})
    out: Dict[str, Any] = {"type": "object"}
    if required:
        out["required"] = required
    out["properties"] = properties
    if getattr(cls, "__orchard_allow_unknown__", False):
        out["x-kubernetes-preserve-unknown-fields"] = True
    out.update(getattr(cls, "__orchard_schema__", None) or {})
    return out
