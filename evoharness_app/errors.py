"""The CLI's one error for bad input: every command raises ``InputError`` with one line that
names the file, field or option at fault, and ``evoharness_app.cli`` prints it and exits with
code 1. Its own module so that command modules import it without importing the CLI (which
imports them)."""

from __future__ import annotations


class InputError(Exception):
    """Bad input: the CLI prints the message and exits with code 1."""


__all__ = ["InputError"]
