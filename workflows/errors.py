"""The activities' one error for bad input: non-retryable, so a run with a bad harness,
split or program fails fast instead of retrying (``activity_options.RETRY``)."""

from __future__ import annotations

from temporalio.exceptions import ApplicationError


def bad_input(message: str) -> ApplicationError:
    """A non-retryable activity error of type ``BadInput`` carrying ``message`` (which names
    what was bad and where)."""
    return ApplicationError(message, type="BadInput", non_retryable=True)
