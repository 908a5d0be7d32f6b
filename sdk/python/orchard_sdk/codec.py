"""JSON values <-> dataclasses, the way the Rust SDK uses serde.

- A dataclass field ``zone_ref`` is the JSON key ``zoneRef`` (camelCase), unless the field says
  otherwise: ``field(metadata={"json": "type"})``.
- Unknown keys are refused (like serde's ``deny_unknown_fields``) unless the class sets
  ``__orchard_allow_unknown__ = True``.
- A field without a default is required; an ``Optional`` field without a default is ``None``.
- ``encode`` leaves out fields whose value is ``None``.

Supported annotations: dataclasses, ``str``, ``int``, ``float``, ``bool``, ``Any``, ``dict``,
``list``, ``Optional[X]``, ``List[X]``, ``Dict[str, X]`` (and the ``list[X]`` / ``X | None``
spellings). A value of the wrong type raises :class:`DecodeError` naming its JSON path.
"""

from __future__ import annotations

import dataclasses
import enum
import sys
import types
import typing
from typing import Any, Callable, Dict, List, Tuple

_NONE = type(None)


class DecodeError(ValueError):
    """A JSON value that does not fit the dataclass; the message names the JSON path."""


def camel(name: str) -> str:
    """``zone_ref`` -> ``zoneRef``."""
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


def json_key(f: dataclasses.Field) -> str:
    """The JSON key of a dataclass field."""
    return f.metadata.get("json", camel(f.name))


_HINTS: Dict[type, Dict[str, Any]] = {}


def _hints(cls: type) -> Dict[str, Any]:
    hints = _HINTS.get(cls)
    if hints is None:
        module = sys.modules.get(cls.__module__)
        hints = typing.get_type_hints(cls, vars(module) if module else None)
        _HINTS[cls] = hints
    return hints


def _optional(tp: Any) -> Tuple[bool, Any]:
    origin = typing.get_origin(tp)
    if origin is typing.Union or (hasattr(types, "UnionType") and origin is types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not _NONE]
        if len(args) < len(typing.get_args(tp)):
            return True, (args[0] if len(args) == 1 else typing.Union[tuple(args)])
    return False, tp


def _type_name(tp: Any) -> str:
    return getattr(tp, "__name__", None) or str(tp)


# A decoder is a function (value, path) -> decoded value, made once per annotation: the type
# introspection happens when it is made (at build time, through `prepare`), not on every call.
Decoder = Callable[[Any, str], Any]
_DECODERS: Dict[Any, Decoder] = {}


def _decoder(tp: Any) -> Decoder:
    try:
        found = _DECODERS.get(tp)
    except TypeError:  # an unhashable annotation
        return _make_decoder(tp)
    if found is None:
        found = _make_decoder(tp)
        _DECODERS[tp] = found
    return found


def _make_decoder(tp: Any) -> Decoder:
    if tp is Any or tp is object:
        return lambda value, path: value
    is_optional, inner = _optional(tp)
    if is_optional:
        decode_inner = _decoder(inner)
        return lambda value, path: None if value is None else decode_inner(value, path)
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        return _dataclass_decoder(tp)
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        allowed = [m.value for m in tp]

        def decode_enum(value: Any, path: str) -> Any:
            try:
                return tp(value)
            except ValueError:
                raise DecodeError(f"{path}: {value!r} is not one of {allowed}") from None

        return decode_enum
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (list, typing.List) or tp is list:
        item = _decoder(args[0] if args else Any)

        def decode_list(value: Any, path: str) -> Any:
            if not isinstance(value, list):
                raise _expected(path, "an array", value)
            return [item(v, f"{path}[{i}]") for i, v in enumerate(value)]

        return decode_list
    if origin in (dict, typing.Dict) or tp is dict:
        item = _decoder(args[1] if len(args) == 2 else Any)

        def decode_dict(value: Any, path: str) -> Any:
            if not isinstance(value, dict):
                raise _expected(path, "an object", value)
            return {k: item(v, f"{path}.{k}") for k, v in value.items()}

        return decode_dict
    if tp is bool:

        def decode_bool(value: Any, path: str) -> Any:
            if not isinstance(value, bool):
                raise _expected(path, "a boolean", value)
            return value

        return decode_bool
    if tp is int:

        def decode_int(value: Any, path: str) -> Any:
            if isinstance(value, bool) or not isinstance(value, int):
                if isinstance(value, float) and value.is_integer():
                    return int(value)
                raise _expected(path, "an integer", value)
            return value

        return decode_int
    if tp is float:

        def decode_float(value: Any, path: str) -> Any:
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise _expected(path, "a number", value)
            return float(value)

        return decode_float
    if tp is str:

        def decode_str(value: Any, path: str) -> Any:
            if not isinstance(value, str):
                raise _expected(path, "a string", value)
            return value

        return decode_str

    def unsupported(value: Any, path: str) -> Any:
        raise DecodeError(f"{path}: unsupported annotation {tp!r}")

    return unsupported


def _dataclass_decoder(cls: type) -> Decoder:
    # Registered before the fields are made, so that a recursive dataclass finds itself.
    plan: List[Tuple[str, str, Decoder, bool, bool]] = []

    def decode_dataclass(value: Any, path: str) -> Any:
        if not isinstance(value, dict):
            raise _expected(path, "an object", value)
        if not allow_unknown:
            for k in value:
                if k not in known:
                    raise DecodeError(
                        f"{path}: unknown field {k!r}, expected one of {sorted(known)}"
                    )
        kwargs = {}
        for name, key, decode_field, required, optional in plan:
            if key in value:
                kwargs[name] = decode_field(value[key], f"{path}.{key}")
            elif required:
                if optional:
                    kwargs[name] = None
                else:
                    raise DecodeError(f"{path}: missing field {key!r}")
        return cls(**kwargs)

    _DECODERS[cls] = decode_dataclass
    hints = _hints(cls)
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        ftype = hints.get(f.name, Any)
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        plan.append((f.name, json_key(f), _decoder(ftype), required, _optional(ftype)[0]))
    known = frozenset(key for _, key, _, _, _ in plan)
    allow_unknown = bool(getattr(cls, "__orchard_allow_unknown__", False))
    return decode_dataclass


def _expected(path: str, what: str, value: Any) -> DecodeError:
    if value is None:
        return DecodeError(f"{path}: expected {what}, got null")
    return DecodeError(f"{path}: expected {what}, got {_json_type(value)}")


def prepare(tp: Any) -> None:
    """Makes the decoder of ``tp`` (and of everything it contains) and the encoders of its
    dataclasses now.

    :func:`orchard_sdk.export` calls it for the plugin's types while componentize-py builds the
    component, so that they are part of its pre-initialised snapshot instead of being made again
    by every call (each call is a fresh instance).
    """
    _decoder(tp)
    for cls in list(_DECODERS):
        if isinstance(cls, type) and dataclasses.is_dataclass(cls):
            _encoder_plan(cls)


def sample(tp: Any, _depth: int = 0) -> Any:
    """A JSON value that decodes as ``tp`` with every field present (optional ones too), so
    that decoding it runs every decoder of ``tp``: strings ``"sample"``, numbers ``1``,
    booleans ``false``, one item per list and dict, an enum's first value. A dataclass met
    again deeper than three levels down (a recursive type) is left out where it may be; a
    type that requires itself (no finite value decodes as it) ends as ``null`` eight levels
    down."""
    if _depth > 8:
        return None
    if tp is Any or tp is object:
        return "sample"
    is_optional, inner = _optional(tp)
    if is_optional:
        return sample(inner, _depth)
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        hints = _hints(tp)
        out = {}
        for f in dataclasses.fields(tp):
            if not f.init:
                continue
            ftype = hints.get(f.name, Any)
            required = (
                f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
            )
            if _depth >= 3 and not required:
                continue
            out[json_key(f)] = sample(ftype, _depth + 1)
        return out
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return next(iter(tp)).value
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (list, typing.List) or tp is list:
        return [sample(args[0] if args else Any, _depth + 1)]
    if origin in (dict, typing.Dict) or tp is dict:
        return {"sample": sample(args[1] if len(args) == 2 else Any, _depth + 1)}
    if tp is bool:
        return False
    if tp is int:
        return 1
    if tp is float:
        return 1.0
    return "sample"


def decode(tp: Any, value: Any, path: str = "$") -> Any:
    """``value`` (parsed JSON) as an instance of annotation ``tp``."""
    return _decoder(tp)(value, path)


_ENCODERS: Dict[type, List[Tuple[str, str]]] = {}


def _encoder_plan(cls: type) -> List[Tuple[str, str]]:
    plan = _ENCODERS.get(cls)
    if plan is None:
        plan = [(f.name, json_key(f)) for f in dataclasses.fields(cls)]
        _ENCODERS[cls] = plan
    return plan


def encode(value: Any) -> Any:
    """``value`` as plain JSON values: dataclasses become objects with camelCase keys."""
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, dict):
        return {str(k): encode(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [encode(v) for v in value]
    if isinstance(value, enum.Enum):
        return value.value
    cls = type(value)
    if dataclasses.is_dataclass(cls):
        out = {}
        for name, key in _encoder_plan(cls):
            v = getattr(value, name)
            if v is not None:
                out[key] = encode(v)
        return out
    return value


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__
