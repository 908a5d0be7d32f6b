"""Failures: exceptions a plugin raises, which the SDK turns into the contract's `failure`.

Raise :class:`Transient` for anything worth retrying (the host retries with backoff),
:class:`InvalidConfiguration` when the user must fix the spec, :class:`Unrecoverable` when
nothing in the spec can fix it. Any other exception escaping a plugin function becomes a
``Transient`` failure naming the exception and where it was raised (the host retries it, as it
does a trap), and its traceback goes to the host's log.
"""

from __future__ import annotations


class Failure(Exception):
    """Why a call failed. Use one of the three subclasses."""

    #: The contract's name of the kind (``failure`` variant case).
    kind = "transient"

    def __init__(self, message: object) -> None:
        super().__init__(str(message))

    @property
    def message(self) -> str:
        """The message, whatever the kind."""
        return str(self.args[0]) if self.args else ""

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and self.message == other.message  # type: ignore[union-attr]

    def __hash__(self) -> int:
        return hash((type(self).__name__, self.message))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r})"


class Transient(Failure):
    """Retried with per-object exponential backoff (reason ``TransientError``)."""

    kind = "transient"


class InvalidConfiguration(Failure):
    """Terminal: the user must fix the spec (reason ``InvalidConfiguration``); no retry."""

    kind = "invalid-configuration"


class Unrecoverable(Failure):
    """Terminal: nothing the user can do in the spec (reason ``UnrecoverableError``); no retry."""

    kind = "unrecoverable"


def from_exception(e: BaseException) -> Failure:
    """The failure an exception stands for: itself when it is a :class:`Failure`, else a
    ``Transient`` naming the exception type, its message and the innermost frame."""
    if isinstance(e, Failure):
        return e
    where = ""
    tb = e.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    if tb is not None:
        code = tb.tb_frame.f_code
        where = f" (in {code.co_name}, {code.co_filename.rsplit('/', 1)[-1]}:{tb.tb_lineno})"
    text = str(e)
    return Transient(f"plugin error: {type(e).__name__}{': ' + text if text else ''}{where}")
