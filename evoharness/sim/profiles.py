"""Generator profiles of the embedded world: ``SimParams`` loaded from YAML.

A profile is a deployment choice (the generation service's config, ``evoharness sim render
--profile``), never a harness's. The shipped profiles live in the package,
``evoharness/sim/profiles/<name>.yaml`` (so they load from an installed wheel too), each
calibrated to the published GenEval per-tag scores of one real model (see
``bench/calibration_bench.py`` and ``docs/simulator.md``, "Calibration"):

- ``sd15-like``: Stable Diffusion 1.5, a GLIGEN-class layout adapter;
- ``sdxl-like``: SDXL, training-free layout guidance (BoxDiff / MultiDiffusion class) — the
  default of ``make evolve`` and the local stack;
- ``flux-like``: FLUX.1-dev, 512 T5 tokens, no layout conditioning, no negative prompt.

A profile file states **every** ``SimParams`` field (a missing one is an error, so a typo never
silently falls back to a default).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from evoharness.harness.io import load_yaml
from evoharness.sim.params import SimParams

#: Folder of the shipped profiles (inside the package).
PROFILE_DIR = Path(__file__).resolve().parent / "profiles"
#: The profile of ``make evolve``, the local stack and ``SimGenerator()``.
DEFAULT_PROFILE = "sdxl-like"


class ProfileError(ValueError):
    """A profile that cannot be loaded; the message names the file, the line and the field."""


def profile_names() -> list[str]:
    """Names of the shipped profiles (``sd15-like``, ``sdxl-like``, ``flux-like``), sorted."""
    return sorted(p.stem for p in PROFILE_DIR.glob("*.yaml"))


def profile_path(name_or_path: str | Path) -> Path:
    """The YAML file of a profile: a shipped profile's name resolves to
    ``evoharness/sim/profiles/<name>.yaml``; anything with a ``/`` or a ``.yaml``/``.yml``
    suffix is a path. Raises ``ProfileError`` for an unknown name."""
    s = str(name_or_path)
    if "/" in s or s.endswith((".yaml", ".yml")):
        return Path(s)
    path = PROFILE_DIR / f"{s}.yaml"
    if not path.is_file():
        raise ProfileError(f"profile {s!r}: no such profile (known: {', '.join(profile_names())})")
    return path


def _key_lines(text: str) -> dict[tuple[str, ...], int]:
    """1-based line of every mapping key, by its path (top level and nested)."""
    lines: dict[tuple[str, ...], int] = {}
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        return lines

    def walk(node: Any, path: tuple[str, ...]) -> None:
        if isinstance(node, yaml.MappingNode):
            for k, v in node.value:
                sub = (*path, str(k.value))
                lines[sub] = k.start_mark.line + 1
                walk(v, sub)

    walk(root, ())
    return lines


def load_profile(name_or_path: str | Path) -> SimParams:
    """Load a generator profile.

    ``name_or_path``: a shipped profile's name (``profile_names()``) or a YAML file path. The
    file is a mapping of every ``SimParams`` field (``capabilities`` a mapping of
    ``evoharness.capabilities.GeneratorCapabilities`` fields). Returns the frozen
    ``SimParams``; its ``generator_id`` is ``sim/<profile>@<sha256(params)[:12]>``.

    Raises ``ProfileError`` naming the file, line and field for: an unknown name, an unreadable
    file or invalid YAML, a top level that is not a mapping, a missing field, an unknown field,
    a value of the wrong type or out of range (a probability outside 0..1).
    """
    path = profile_path(name_or_path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ProfileError(f"{path}: cannot read profile: {exc.strerror or exc}") from None
    try:
        data = load_yaml(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        raise ProfileError(f"{where}: invalid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise ProfileError(f"{path}: a profile is a mapping of SimParams fields")
    lines = _key_lines(text)
    missing = [f for f in SimParams.model_fields if f not in data]
    if missing:
        raise ProfileError(f"{path}: missing required field(s): {', '.join(missing)}")
    try:
        # pydantic's strict JSON rules, as for harness files: "77" is not the number 77 and
        # true is not 1.0 (lax validation would coerce both); YAML 1.2 floats (1e-3) still read
        as_json = json.dumps(data, ensure_ascii=False)  # NaN then fails its field range
    except (TypeError, ValueError) as exc:
        raise ProfileError(f"{path}: not a JSON-shaped mapping: {exc}") from None
    try:
        return SimParams.model_validate_json(as_json, strict=True)
    except ValidationError as exc:
        msgs = []
        for err in exc.errors():
            loc = tuple(str(x) for x in err["loc"])
            line = next((lines[loc[:n]] for n in range(len(loc), 0, -1) if loc[:n] in lines), 0)
            where = f"{path}:{line}" if line else str(path)
            what = "unknown field" if err["type"] == "extra_forbidden" else err["msg"]
            msgs.append(f"{where}: field {'.'.join(loc)}: {what}")
        raise ProfileError("; ".join(msgs)) from None


def params_for(
    profile: str | Path = DEFAULT_PROFILE, overrides: dict[str, Any] | None = None
) -> SimParams:
    """A profile with some fields replaced (the generation service's ``sim`` settings).

    Raises ``ProfileError`` naming the override field that is unknown or out of range."""
    base = load_profile(profile)
    if not overrides:
        return base
    try:
        return SimParams.model_validate({**base.model_dump(), **overrides})
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(x) for x in err["loc"])
        what = "unknown field" if err["type"] == "extra_forbidden" else err["msg"]
        raise ProfileError(f"sim.{loc}: {what} (override of profile {profile})") from None
