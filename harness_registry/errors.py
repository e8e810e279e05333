"""Registry errors. The gRPC service maps them to status codes:
``NotFound`` → NOT_FOUND, ``StalePromotion`` → FAILED_PRECONDITION,
``InvalidArgument`` → INVALID_ARGUMENT."""

from __future__ import annotations


class RegistryError(Exception):
    """Base class of registry errors."""


class NotFound(RegistryError, LookupError):
    """A registration, harness document or channel that does not exist (the message names it)."""


class InvalidArgument(RegistryError, ValueError):
    """Bad input: the message names the field."""


class StalePromotion(RegistryError):
    """A promotion whose expected current registration (or channel version) is not the
    channel's current one: somebody else moved the channel first. Nothing was written.

    ``current_registration_id`` and ``current_version`` describe what the channel points at
    now, so the caller can decide whether to retry.
    """

    def __init__(
        self, message: str, current_registration_id: str | None, current_version: int
    ) -> None:
        super().__init__(message)
        self.current_registration_id = current_registration_id
        self.current_version = current_version
