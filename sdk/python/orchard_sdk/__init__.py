"""orchard-sdk for Python: write an Orchard actuator as a WebAssembly component with
componentize-py.

Subclass :class:`Actuator` with your own spec, filter and state dataclasses, then export it
from the plugin's ``app.py``::

    from orchard_sdk import Actuator, export

    class Vhost(Actuator):
        ...

    Actuator = export(Vhost)   # the name componentize-py looks for

Build with ``sdk/python/build.sh <plugin-dir> <out.wasm>``. The same classes run natively (a
plain ``python3``, HTTP over ``urllib``) for unit tests.
"""

from . import codec, http, log, report
from ._export import export
from .actuator import Actuator, Raw
from .codec import DecodeError, decode, encode
from .errors import Failure, InvalidConfiguration, Transient, Unrecoverable
from .handler import ResourceHandler, ensure
from .types import (
    Availability,
    Dependency,
    DependencyDecl,
    Description,
    NeedsRefresh,
    Object,
    Progress,
    Resource,
    Status,
    WaitEvent,
    WaitingOnExternal,
    WaitingOnObject,
)

__all__ = [
    "Actuator", "Availability", "DecodeError", "Dependency", "DependencyDecl", "Description",
    "Failure", "InvalidConfiguration", "NeedsRefresh", "Object", "Progress", "Raw",
    "Resource", "ResourceHandler", "Status", "Transient", "Unrecoverable", "WaitEvent",
    "WaitingOnExternal", "WaitingOnObject", "codec", "decode", "encode", "ensure", "export",
    "http", "log", "report",
]
