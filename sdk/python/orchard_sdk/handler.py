"""The ``ResourceHandler`` pattern (OpenChoreo) for optional sub-resources, usable inside a
reconciler: not required -> delete it if present; required -> fetch it, then create it or
bring it up to date."""

from __future__ import annotations

from typing import Any, Generic, Optional, TypeVar

from .errors import from_exception
from .types import Status

C = TypeVar("C")


class ResourceHandler(Generic[C]):
    """One optional sub-resource of an external resource (a queue policy, a permission…)."""

    #: Name shown in messages, e.g. ``"permissions"``.
    name: str = "sub-resource"

    def is_required(self) -> bool:
        """Whether the sub-resource should exist. ``False`` deletes it."""
        raise NotImplementedError

    def current(self) -> Optional[C]:
        """The current state; ``None`` when it does not exist."""
        raise NotImplementedError

    def create(self) -> None:
        """Creates it."""
        raise NotImplementedError

    def update(self, current: C) -> bool:
        """Brings it to the desired state. Returns whether anything changed."""
        raise NotImplementedError

    def delete(self, current: C) -> None:
        """Deletes it. MUST succeed when it is already gone."""
        raise NotImplementedError


def ensure(handler: ResourceHandler[Any]) -> Status:
    """Drives one handler through the pattern: ``needs-refresh`` when anything changed (so that
    the host fetches the resource again), done when it was already as desired, and a failed
    status when a step raised."""
    try:
        current = handler.current()
        required = handler.is_required()
        what = None
        if not required and current is not None:
            handler.delete(current)
            what = "deleted"
        elif required and current is None:
            handler.create()
            what = "created"
        elif required and current is not None and handler.update(current):
            what = "updated"
        return Status.done() if what is None else Status.needs_refresh(f"{handler.name} {what}")
    except Exception as e:
        return Status.failed(from_exception(e))
