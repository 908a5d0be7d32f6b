"""orchard-sdk for Python: write an Orchard actuator as a WebAssembly component with
componentize-py.

Subclass :class:`Actuator` with your own spec, filter and state dataclasses, then export it
from the plugin's ``app.py``::

    from orchard_sdk import Actuator, export

    class Vhost(Actuator):
        ...

    Actuator = export(Vhost)   # the name componentize-py looks for

A kind with several API versions also overrides ``versions`` and ``convert`` and binds
``Conversion = export_conversion(Vhost)`` (see :mod:`orchard_sdk.versions`). A plugin whose
external system lets the host skip calls overrides ``shortcuts`` and binds ``Shortcuts =
export_shortcuts(Vhost)`` (with ``Conversion``).

Build with ``sdk/python/build.sh <plugin-dir> <out.wasm>``. The same classes run natively (a
plain ``python3``, HTTP over ``urllib``) for unit tests.
"""

from . import codec, http, log, report
from ._export import export, export_conversion, export_shortcuts
from .actuator import Actuator, Raw
from .codec import DecodeError, decode, encode
from .errors import Failure, InvalidConfiguration, Transient, Unrecoverable
from .handler import ResourceHandler, ensure
from .types import (
    ApiVersion,
    Availability,
    Convertible,
    Dependency,
    DependencyDecl,
    Description,
    NeedsRefresh,
    Object,
    Progress,
    Resource,
    Shortcuts,
    Status,
    WaitEvent,
    WaitingOnExternal,
    WaitingOnObject,
)
from .versions import check_round_trip, check_versions

__all__ = [
    "Actuator", "ApiVersion", "Availability", "Convertible", "DecodeError", "Dependency",
    "DependencyDecl", "Description", "Failure", "InvalidConfiguration", "NeedsRefresh", "Object",
    "Progress", "Raw", "Resource", "ResourceHandler", "Shortcuts", "Status", "Transient",
    "Unrecoverable", "WaitEvent", "WaitingOnExternal", "WaitingOnObject", "check_round_trip",
    "check_versions",
    "codec", "decode", "encode", "ensure", "export", "export_conversion", "export_shortcuts",
    "http", "log", "report",
]
