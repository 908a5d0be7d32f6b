"""Logs from the plugin into the host's ``tracing``, tagged there with plugin and object.

Outside a component (unit tests) the lines go to Python's ``logging`` (logger ``orchard``).
``print`` inside a component also reaches the host's log, as ``stdout`` lines without a level.
"""

from __future__ import annotations

import logging as _logging

from . import _warmup

try:  # inside a component: the generated bindings of `orchard:actuator/log`
    from wit_world.imports import log as _wit
except ImportError:  # natively
    _wit = None

_native = _logging.getLogger("orchard")
_LEVELS = ("trace", "debug", "info", "warn", "error")


def log(level: str, message: str) -> None:
    """Sends one line; ``level`` is ``trace``, ``debug``, ``info``, ``warn`` or ``error``."""
    if level not in _LEVELS:
        raise ValueError(f"unknown log level {level!r}")
    if _warmup.active:
        return
    if _wit is not None:
        _wit.log(getattr(_wit.Level, level.upper()), message)
    else:
        _native.log(
            {"trace": 5, "debug": 10, "info": 20, "warn": 30, "error": 40}[level], message
        )


def trace(message: str) -> None:
    log("trace", message)


def debug(message: str) -> None:
    log("debug", message)


def info(message: str) -> None:
    log("info", message)


def warn(message: str) -> None:
    log("warn", message)


def error(message: str) -> None:
    log("error", message)
