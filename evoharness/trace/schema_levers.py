"""Levers derived from the harness schema (issue 29, "a lever for every part of a harness").

Pure functions over a ``Harness``; no I/O, no generator, no simulator. Every lever is one
RFC 6902 patch inside one responsibility (``evoharness.harness.patch.Patch``), built by
walking the pydantic models of ``evoharness.harness.schema`` and comparing each value with its
field's schema default (``FieldInfo.get_default``):

- ``remove``: take one item out of a list (a policy rewrite, a negative term, a tool, a skill,
  a skill's trigger or effect, a middleware stage, a memory guideline or bundle, one feature
  of a layout planner's ``when``);
- ``reset``: restore one field to its schema default (the template, a generation parameter,
  ``max_prompt_tokens``, a tool's ``min_objects`` or ``when``, a stage's ``repair_budget``,
  ``memory.enabled``, ...);
- ``toggle``: flip a boolean (``enabled`` of a rewrite or tool, ``memory.enabled``);
- ``step``: move a number one step toward its default, or toward the value passing executions
  used (``toward``: the caller reads it from the trajectories; a field path → value);
- ``widen``: add a prompt feature to a layout planner's ``when``, or a feature trigger to a
  skill that has triggers (it then fires on that feature too);
- ``narrow``: add a feature trigger to a skill *without* triggers — a skill without triggers
  fires on every prompt (``evoharness.runtime``), one with a single feature trigger only on
  prompts showing that feature, so the skill keeps helping where it belongs and stops
  changing every other prompt.

The mutation proposer (``mutation_levers``, issue 31) walks the same models with ``explore``:
it adds a bounded ``step`` either way of a number (within the field's ``ge``/``le``) and an
``add`` of a new list item the schema alone can write (a rewrite of each kind, a tool or
stage of each kind with its defaults), the moves away from the defaults that an undirected
search needs and TRACE's attributed levers do not.

``levers``/``propose`` take the failing prompt features (``features``; ``features_of`` maps a
failing constraint type to the feature a trigger or ``when`` names): feature levers for those
features come first among the finer moves, the other features' after every other lever.

**Components** (``components``) are the parts counterfactual attribution takes out or resets
one at a time (``evoharness.trace.counterfactual``): every item of a section's top-level lists
(``/policy/rewrites/<i>``, ``/policy/negative_terms/<i>``, ``/tools/tools/<i>``,
``/skills/skills/<i>``, ``/middleware/stages/<i>``, ``/memory/guidelines/<i>``,
``/memory/bundles/<i>``) and every field, at any depth, whose value differs from its schema
default. ``levers`` adds the finer moves (``toggle``, ``step``, ``widen`` and removals inside an
item) that a proposer may try within an attributed responsibility (``propose``).

Identity and prose fields (names, descriptions, Markdown bodies, discriminator ``kind`` tags,
bundle ids and bookkeeping) are never levers: changing them changes no decision.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from types import UnionType
from typing import Annotated, Any, Final, Literal, TypeVar, Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict
from pydantic_core import PydanticUndefined

from evoharness.harness.io import harness_id
from evoharness.harness.patch import Patch, PatchError, apply_patch
from evoharness.harness.schema import Harness, Responsibility
from evoharness.program import PARAM_BOUNDS, GenerationParams
from evoharness.runtime.runtime import HarnessCompileError, check_harness

T = TypeVar("T")

LeverKind = Literal["remove", "reset", "toggle", "step", "widen", "narrow", "add"]

#: Fields that name or describe rather than decide (never levers).
IDENTITY_FIELDS: Final = frozenset(
    {
        "schema_version",
        "name",
        "description",
        "body",
        "kind",
        "bundle_id",
        "created_round",
        "reward_gap",
        "retrieval_key",
        "decision_guidance",
        "capacity",
    }
)
#: The depth of a component list item: ``/<section>/<list>/<i>``.
COMPONENT_DEPTH: Final = 3
#: Prompt features a layout planner's ``when`` can name (``evoharness.harness.schema.Trigger``
#: documents the extracted features).
PROMPT_FEATURES: Final = ("count", "position", "color", "text", "negation", "multi_object")
#: The prompt feature whose trigger (or layout ``when``) covers a constraint of each type: a
#: failing constraint of that type is a failure on prompts showing that feature
#: (``object`` constraints fail on prompts with several objects; ``attribute`` ones bind
#: colours and materials to objects). Types without one (``vqa``, ``quality``) name none.
FEATURE_OF_CONSTRAINT: Final = {
    "count": "count",
    "position": "position",
    "color": "color",
    "attribute": "color",
    "text": "text",
    "negative": "negation",
    "object": "multi_object",
}
#: A ``step`` moves a number this share of the way toward its goal (halfway: two steps reach
#: within a quarter of the distance, and each is small enough to gate on its own).
STEP_SHARE: Final = 0.5


class Lever(BaseModel):
    """One schema-derived change of one part of a harness.

    ``path``: JSON pointer of the part (``/memory/guidelines/0``); ``kind``: ``LeverKind``;
    ``label``: what it does, for people ("remove memory guideline 0 (trigger 'a')");
    ``component``: True for a whole component taken out or reset (module docstring);
    ``patch``: the change, inside ``patch.responsibility``."""

    model_config = ConfigDict(extra="forbid")

    path: str
    kind: LeverKind
    label: str
    component: bool
    patch: Patch
    feature: str | None = None

    @property
    def responsibility(self) -> str:
        """The responsibility the lever's patch writes."""
        return self.patch.responsibility.value


def _default(model: BaseModel, field: str) -> Any:
    """The schema default of ``field`` on ``model``'s class (PydanticUndefined when required)."""
    info = type(model).model_fields[field]
    return info.get_default(call_default_factory=True)


def _json(v: Any) -> Any:
    return v.model_dump(mode="json") if isinstance(v, BaseModel) else v


def _describe(item: Any) -> str:
    """A short human name for a list item (its name, kind, trigger or value)."""
    if isinstance(item, BaseModel):
        for attr in ("name", "trigger", "kind", "bundle_id"):
            v = getattr(item, attr, None)
            if isinstance(v, str) and v:
                return f"{attr} {v!r}"
        return type(item).__name__
    return repr(item)


def _lever(
    resp: Responsibility, path: str, kind: LeverKind, label: str, op: dict[str, Any], comp: bool
) -> Lever:
    return Lever(
        path=path,
        kind=kind,
        label=label,
        component=comp,
        patch=Patch(
            responsibility=resp,
            ops=[op],
            rationale=f"schema lever: {label}",
            expected_effect=f"the harness without this part as it is now ({kind} {path})",
        ),
    )


def _walk(
    model: BaseModel, path: str, resp: Responsibility, explore: bool = False
) -> Iterator[Lever]:
    """The levers of ``model`` (at JSON pointer ``path``, inside ``resp``); ``explore`` adds
    the mutation proposer's moves away from the defaults (``mutation_levers``)."""
    for field in type(model).model_fields:
        if field in IDENTITY_FIELDS:
            continue
        value = getattr(model, field)
        here = f"{path}/{field}"
        depth = here.count("/")
        default = _default(model, field)
        if isinstance(value, BaseModel):
            yield from _walk(value, here, resp, explore)
            continue
        if explore:
            yield from _explore(model, field, value, here, resp)
        if isinstance(value, list):
            for i, item in enumerate(value):
                label = f"remove {here.strip('/')}[{i}] ({_describe(item)})"
                yield _lever(
                    resp,
                    f"{here}/{i}",
                    "remove",
                    label,
                    {"op": "remove", "path": f"{here}/{i}"},
                    depth + 1 == COMPONENT_DEPTH,
                )
                if isinstance(item, BaseModel):
                    yield from _walk(item, f"{here}/{i}", resp, explore)
            if default is not PydanticUndefined and _json(default) != [_json(v) for v in value]:
                if default:  # an empty default is reached by removing items one at a time
                    yield _lever(
                        resp,
                        here,
                        "reset",
                        f"reset {here.strip('/')} to its default {default!r}",
                        {"op": "replace", "path": here, "value": _json(default)},
                        True,
                    )
            if field == "when":
                for feat in PROMPT_FEATURES:
                    if feat not in value:
                        yield _lever(
                            resp,
                            here,
                            "widen",
                            f"add {feat!r} to {here.strip('/')}",
                            {"op": "add", "path": f"{here}/-", "value": feat},
                            False,
                        ).model_copy(update={"feature": feat})
            if field == "triggers":
                yield from _trigger_levers(value, here, resp)
            continue
        if default is PydanticUndefined or default is None:
            continue  # a required field, or an optional payload (an effect's value)
        if isinstance(value, bool):
            yield _lever(
                resp,
                here,
                "reset" if value != default else "toggle",
                f"{'reset' if value != default else 'toggle'} {here.strip('/')} to {not value}",
                {"op": "replace", "path": here, "value": not value},
                value != default,
            )
            continue
        if value != default:
            yield _lever(
                resp,
                here,
                "reset",
                f"reset {here.strip('/')} from {value!r} to its default {default!r}",
                {"op": "replace", "path": here, "value": default},
                depth <= COMPONENT_DEPTH + 1,
            )


#: Fields a mutation never steps: a new seed offset only re-draws the images (a lottery on
#: the evaluated seeds, not a decision about how to generate).
EXPLORE_SKIP: Final = frozenset({"seed_offset"})
#: A bounded ``step`` (``mutation_levers``) moves a number this share of its declared range
#: (at least 1 for an integer); without an upper bound, this share of its magnitude.
RANGE_SHARE: Final = 0.125


def _bounds(model: BaseModel, field: str) -> tuple[float | None, float | None]:
    """The declared ``(ge, le)`` of ``field`` (pydantic ``Field(ge=, le=)``, or
    ``evoharness.program.PARAM_BOUNDS`` for the generation parameters); None when open."""
    if isinstance(model, GenerationParams) and field in PARAM_BOUNDS:
        a, b = PARAM_BOUNDS[field]
        return float(a), float(b)
    lo: float | None = None
    hi: float | None = None
    for m in type(model).model_fields[field].metadata:
        lo = getattr(m, "ge", lo)
        hi = getattr(m, "le", hi)
    return lo, hi


def _bounded_steps(model: BaseModel, field: str, value: float) -> list[float]:
    """``value`` one step (``RANGE_SHARE``) down and up, clipped to the field's bounds;
    integers stay integers (and multiples of 8 stay multiples of 8: image sides)."""
    lo, hi = _bounds(model, field)
    span = (hi - lo) if lo is not None and hi is not None else max(abs(value), 1.0)
    out: list[float] = []
    for sign in (-1, 1):
        if isinstance(value, int):
            d = max(1, int(span * RANGE_SHARE))
            if value % 8 == 0 and d >= 8:
                d -= d % 8
            new: float = value + sign * d
        else:
            new = round(value + sign * span * RANGE_SHARE, 6)
        if lo is not None:
            new = max(new, int(lo) if isinstance(value, int) else lo)
        if hi is not None:
            new = min(new, int(hi) if isinstance(value, int) else hi)
        if new != value and new not in out:
            out.append(new)
    return out


def _item_models(annotation: Any) -> list[type[BaseModel]]:
    """The pydantic models a ``list[...]`` field's items may be (the members of a tagged
    union, or the one model); ``[]`` for lists of plain values."""
    args = get_args(annotation)
    item = args[0] if args else None
    while get_origin(item) is Annotated:
        item = get_args(item)[0]
    members = get_args(item) if get_origin(item) in (Union, UnionType) else (item,)
    return [m for m in members if isinstance(m, type) and issubclass(m, BaseModel)]


def _new_items(cls: type[BaseModel], taken: set[str]) -> Iterator[BaseModel]:
    """Every instance of ``cls`` the schema alone can write: its defaults, one per value of
    a required ``Literal`` field, a fresh ``name`` (not in ``taken``) when one is required.
    Nothing when another field is required (its value would have to be invented)."""
    required = {f: i for f, i in cls.model_fields.items() if i.is_required()}
    literal = [f for f, i in required.items() if get_origin(i.annotation) is Literal]
    if set(required) - set(literal) - {"name"} or len(literal) > 1:
        return
    choices = get_args(required[literal[0]].annotation) if literal else (None,)
    for choice in choices:
        data: dict[str, Any] = {literal[0]: choice} if literal else {}
        if "name" in required:
            stem = str(
                choice
                or getattr(cls.model_fields.get("kind"), "default", "")
                or cls.__name__.lower()
            )
            data["name"] = next(
                f"{stem}_{i}" for i in range(1, 10_000) if f"{stem}_{i}" not in taken
            )
        try:
            yield cls(**data)
        except ValueError:
            continue


def _explore(
    model: BaseModel, field: str, value: Any, here: str, resp: Responsibility
) -> Iterator[Lever]:
    """The mutation proposer's moves on ``model.field`` (at ``here``) that TRACE's levers
    lack: a bounded ``step`` either way of a number (``_bounded_steps``) and the ``add`` of
    a new list item the schema can write (``_new_items``)."""
    if field in EXPLORE_SKIP:
        return
    if isinstance(value, int | float) and not isinstance(value, bool):
        for new in _bounded_steps(model, field, value):
            yield _lever(
                resp,
                here,
                "step",
                f"step {here.strip('/')} from {value!r} to {new!r} (within its bounds)",
                {"op": "replace", "path": here, "value": new},
                False,
            )
    if isinstance(value, list):
        taken = {str(getattr(v, "name", "")) for v in value}
        for cls in _item_models(type(model).model_fields[field].annotation):
            for item in _new_items(cls, taken):
                yield _lever(
                    resp,
                    here,
                    "add",
                    f"add {_describe(item)} to {here.strip('/')}",
                    {"op": "add", "path": f"{here}/-", "value": item.model_dump(mode="json")},
                    False,
                )


def mutation_levers(harness: Harness) -> list[Lever]:
    """Every schema-derived edit of ``harness`` in every responsibility, for the mutation
    proposer (``evoharness.search.mutation``): the levers of ``levers`` (removals, resets,
    toggles, steps toward the defaults, widenings, narrowings) plus the moves away from the
    defaults that an undirected search needs (``_explore``: bounded steps either way, new
    list items). Each applies cleanly, passes the runtime's static check, changes the
    harness and yields a harness no earlier lever yields; in document order."""
    walked: list[Lever] = []
    for resp in Responsibility:
        walked += _walk(harness.section(resp), f"/{resp.value}", resp, explore=True)
        walked += _steps(harness, {}, resp)
    return _valid(harness, walked)


def _trigger_levers(triggers: list[Any], here: str, resp: Responsibility) -> Iterator[Lever]:
    """A feature trigger added to a skill's ``triggers`` (``here``) per prompt feature it
    does not name yet: ``narrow`` when the skill has no trigger (it fires on every prompt;
    with one it fires on that feature only), ``widen`` otherwise (it fires on one more)."""
    have = {t.value for t in triggers if getattr(t, "kind", None) == "feature"}
    for feat in PROMPT_FEATURES:
        if feat in have:
            continue
        op = {"op": "add", "path": f"{here}/-", "value": {"kind": "feature", "value": feat}}
        if triggers:
            kind: LeverKind = "widen"
            label = f"add feature trigger {feat!r} to {here.strip('/')}"
        else:
            kind = "narrow"
            label = f"narrow {here.rsplit('/', 1)[0].strip('/')} (fires on every prompt) to feature {feat!r}"
        yield _lever(resp, here, kind, label, op, False).model_copy(update={"feature": feat})


def features_of(constraint_types: Iterable[str]) -> list[str]:
    """The prompt features (``FEATURE_OF_CONSTRAINT``) of failing ``constraint_types``, each
    once, in first-seen order; a type without a feature adds none."""
    out: list[str] = []
    for t in constraint_types:
        f = FEATURE_OF_CONSTRAINT.get(str(t))
        if f is not None and f not in out:
            out.append(f)
    return out


def distinct_valid(harness: Harness, items: Iterable[T], patch_of: Callable[[T], Patch]) -> list[T]:
    """The ``items`` whose patch (``patch_of(item)``) applies to ``harness``, passes the
    runtime's static compile check (``runtime.check_harness``), changes the document and
    yields a harness no earlier item yields (the first one kept), in order. The one filter of
    every generated proposal (schema levers, the rule proposer's templates)."""
    seen = {harness_id(harness)}
    out: list[T] = []
    for item in items:
        try:
            child = apply_patch(harness, patch_of(item))
            check_harness(child)
        except (PatchError, HarnessCompileError):
            continue
        hid = harness_id(child)
        if hid in seen:
            continue
        seen.add(hid)
        out.append(item)
    return out


def _valid(harness: Harness, items: Iterable[Lever]) -> list[Lever]:
    return distinct_valid(harness, items, lambda lv: lv.patch)


def _all(harness: Harness) -> Iterator[Lever]:
    for resp in Responsibility:
        yield from _walk(harness.section(resp), f"/{resp.value}", resp)


def components(harness: Harness) -> list[Lever]:
    """The harness's components that can be taken out or reset, one ``Lever`` each
    (``component=True``; module docstring), in document order (policy, tools, skills,
    middleware, memory). Each applies cleanly and changes the harness."""
    return _valid(harness, (lv for lv in _all(harness) if lv.component))


def _steps(harness: Harness, toward: Mapping[str, float], resp: Responsibility) -> Iterator[Lever]:
    """``step`` levers: every numeric field of ``resp`` whose value differs from its default
    or from ``toward[path]``, moved ``STEP_SHARE`` of the way (integers rounded away from the
    current value, so a step always moves)."""
    doc = harness.to_document()

    def numbers(node: Any, path: str) -> Iterator[tuple[str, float]]:
        if isinstance(node, dict):
            for k, v in node.items():
                if k not in IDENTITY_FIELDS:
                    yield from numbers(v, f"{path}/{k}")
        elif isinstance(node, list):
            for i, v in enumerate(node):
                yield from numbers(v, f"{path}/{i}")
        elif isinstance(node, int | float) and not isinstance(node, bool):
            yield path, node

    defaults = Harness().to_document()
    for path, value in numbers(doc[resp.value], f"/{resp.value}"):
        goals: list[tuple[str, float]] = []
        if path in toward:
            goals.append(("toward what passing executions used", float(toward[path])))
        dflt = _lookup(defaults, path)
        if isinstance(dflt, int | float) and not isinstance(dflt, bool):
            goals.append(("toward its default", float(dflt)))
        for why, goal in goals:
            if goal == value:
                continue
            new: float = value + STEP_SHARE * (goal - value)
            if isinstance(value, int):
                new = math.ceil(new) if goal > value else math.floor(new)
            yield _lever(
                resp,
                path,
                "step",
                f"step {path.strip('/')} from {value!r} to {new!r} ({why}, {goal!r})",
                {"op": "replace", "path": path, "value": new},
                False,
            )


def _lookup(doc: Any, path: str) -> Any:
    node = doc
    for part in path.strip("/").split("/"):
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return None
    return node


def default_at(harness: Harness, path: str) -> Any:
    """The schema default of the field that JSON pointer ``path`` names in ``harness``
    (walking its pydantic models, list items by index: ``/middleware/stages/1/n`` → the
    default of that stage's ``n``), or ``PydanticUndefined`` when the path names no model
    field or the field has no default."""
    node: Any = harness
    parts = path.strip("/").split("/")
    for part in parts[:-1]:
        if isinstance(node, BaseModel) and part in type(node).model_fields:
            node = getattr(node, part)
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return PydanticUndefined
    if isinstance(node, BaseModel) and parts[-1] in type(node).model_fields:
        return _default(node, parts[-1])
    return PydanticUndefined


def restores_defaults(harness: Harness, patch: Patch) -> bool:
    """True when every op of ``patch`` moves a setting of ``harness`` onto its schema default
    (``default_at``), or, for a number, toward it without passing it (a ``reset`` or a
    ``step`` toward the default): the child is the parent with settings put back where the
    schema puts them and nothing added. The gate prices such a child's cost against the
    default's (``gates.evaluate_gate``'s ``reference_cost``). False for any other op (add,
    remove, a value away from or past the default, a field without a default)."""
    doc = harness.to_document()
    for op in patch.ops:
        path = op.get("path", "")
        if op.get("op") != "replace" or not isinstance(path, str):
            return False
        default = default_at(harness, path)
        if default is PydanticUndefined or default is None:
            return False
        now, new, goal = _lookup(doc, path), op.get("value"), _json(default)
        if now is None or new == now:
            return False
        numeric = all(
            isinstance(x, int | float) and not isinstance(x, bool) for x in (now, new, goal)
        )
        if numeric:
            if not min(now, goal) <= new <= max(now, goal):
                return False
        elif new != goal:
            return False
    return True


def levers(
    harness: Harness,
    responsibility: Responsibility | str,
    toward: Mapping[str, float] | None = None,
    features: Sequence[str] | None = None,
) -> list[Lever]:
    """Every schema-derived lever inside ``responsibility`` (module docstring): components
    first, then removals inside items, toggles, widenings, narrowings and number steps
    (``toward``: JSON pointer → value that passing executions used, e.g.
    ``{"/policy/params/steps": 40}``). ``features``: the failing prompt features
    (``features_of``); when given, the feature levers (``widen``/``narrow``) for them come
    right after the components, in ``features`` order, and those for other features last.
    Each applies cleanly, changes the harness and yields a harness no earlier lever yields.
    Raises ``ValueError`` for an unknown responsibility."""
    resp = Responsibility(responsibility)
    walked = [*_walk(harness.section(resp), f"/{resp.value}", resp)]
    walked += _steps(harness, toward or {}, resp)
    comps = [lv for lv in walked if lv.component]
    finer = [lv for lv in walked if not lv.component]
    if features:
        rank = {f: i for i, f in enumerate(features)}
        wanted = sorted(
            (lv for lv in finer if lv.feature in rank), key=lambda lv: rank[str(lv.feature)]
        )
        other = [lv for lv in finer if lv.feature is not None and lv.feature not in rank]
        rest = [lv for lv in finer if lv.feature is None]
        finer = [*wanted, *rest, *other]
    return _valid(harness, iter([*comps, *finer]))


def rank_for(cands: Sequence[Lever], relevant_paths: Sequence[str]) -> list[Lever]:
    """``cands`` with the levers on (or inside) ``relevant_paths`` first, each group in its
    given order."""

    def hit(lv: Lever) -> bool:
        return any(lv.path == p or lv.path.startswith(p + "/") for p in relevant_paths)

    return [lv for lv in cands if hit(lv)] + [lv for lv in cands if not hit(lv)]


def propose(
    harness: Harness,
    responsibility: Responsibility | str,
    n: int,
    toward: Mapping[str, float] | None = None,
    features: Sequence[str] | None = None,
) -> list[Patch]:
    """The schema-derived proposer: the first ``n`` ``levers`` inside ``responsibility`` (an
    attributed responsibility; ``no_patch`` or anything else gives ``[]``; ``toward`` and
    ``features`` as in ``levers``), as patches that go through the same proposal checks and
    gate as any other candidate. Raises ``ValueError`` when ``n`` < 0."""
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    if str(responsibility) not in {r.value for r in Responsibility}:
        return []
    return [lv.patch for lv in levers(harness, responsibility, toward, features)[:n]]
