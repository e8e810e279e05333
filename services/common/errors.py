"""Errors that services raise and the shared server maps to gRPC status codes
(``services.common.server``): ``InvalidField`` -> INVALID_ARGUMENT, ``NotFound`` ->
NOT_FOUND, ``Unavailable`` -> UNAVAILABLE, ``FailedPrecondition`` -> FAILED_PRECONDITION,
``ResourceExhausted`` -> RESOURCE_EXHAUSTED."""

from __future__ import annotations


class InvalidField(ValueError):
    """A request field is invalid. ``field`` is its dotted path (``program.params.steps``);
    the message reads ``<field>: <reason>``."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


class NotFound(KeyError):
    """A referenced object (S3 key, harness id, channel) does not exist."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "not found"


class Unavailable(ConnectionError):
    """A dependency (S3, a model server) cannot be reached; clients may retry."""


class FailedPrecondition(RuntimeError):
    """The system is not in a state that allows the request (e.g. a stale expected id)."""


class ResourceExhausted(RuntimeError):
    """A size or quota limit was exceeded (e.g. an image larger than the configured cap)."""
