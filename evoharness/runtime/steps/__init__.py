"""The compile steps of ``HarnessRuntime.compile``, one module per responsibility.

``policy`` reads the prompt and writes the program's text, negative prompt and parameters;
``memory`` applies guidelines and retrieved experience bundles; ``skills`` routes skills and
applies their effects; ``tools`` runs the declared tools. Repair requests come from the
middleware (``evoharness.runtime.middleware.repair_requests``). Memory, skills and repair do
not write the program themselves: each adds what it asks for to one ``Requests`` (rewrites,
negative terms, appended text, parameter overrides, forced tools, each with its source), and
the policy and tools steps apply them in a fixed order. Every step appends trace records
through ``rec(responsibility, step, **fields)``. This package imports nothing outside
``evoharness``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

#: ``rec(responsibility, step, **fields)``: appends one trace record.
Rec = Callable[..., None]


@dataclass
class Requests:
    """What memory, skills and repair ask of the policy and tools steps, in the order asked.

    ``rewrites``: ``(rewrite kind, source)``; ``negative``: ``(term, source)``; ``append``:
    ``(text, source)``; ``params``: ``(parameter, source, value)``; ``tools``: ``(declared tool
    name, source)``; ``no_layout``: sources that ask for no layout this time (a repair of a
    colour or texture in a prompt that needs no layout: ``middleware.repair_requests``), which wins
    over ``tools`` and the planners' ``when``. ``source`` names who asked
    (``memory.guidelines[0]``, ``memory.bundle:<id>``, ``skill:<name>``,
    ``repair:<attempt>:<constraint_id>``)."""

    rewrites: list[tuple[str, str]] = field(default_factory=list)
    negative: list[tuple[str, str]] = field(default_factory=list)
    append: list[tuple[str, str]] = field(default_factory=list)
    params: list[tuple[str, str, Any]] = field(default_factory=list)
    tools: list[tuple[str, str]] = field(default_factory=list)
    no_layout: list[str] = field(default_factory=list)


def word_in(word: str, text: str) -> bool:
    """True when ``word`` occurs in ``text`` as a whole word (case-insensitive)."""
    return re.search(rf"(?<!\w){re.escape(word.lower())}(?!\w)", text.lower()) is not None


def as_list(v: Any) -> list[str]:
    """A guidance or effect value as a list of non-empty strings: None -> [], a string ->
    its comma-separated parts (the string itself when it has no comma), a list -> its items."""
    if v is None:
        return []
    if isinstance(v, str):
        return [p.strip() for p in v.split(",") if p.strip()] if "," in v else [v.strip()]
    return [str(x).strip() for x in v if str(x).strip()]


__all__ = ["Rec", "Requests", "as_list", "word_in"]
