"""Scope probes (issue 16, finding 1): before a candidate is gated, find what its patch
touches and run parent and candidate on probe prompts that exercise exactly that.

The gate sees only the target, held-out and preservation prompts. A patch can change the
harness for prompts none of them contains: ``add /policy/negative_terms/0 "bicycle"``, proposed
from one "... with no bicycles" task, makes every "a photo of a bicycle" an empty background,
and no gated prompt mentions a bicycle. Scope probes close that gap:

1. **What an op touches** (``derive_scope``), read from the patch and the two harness documents
   (never from a task's labels):

   - a negative term (policy, a skill's or a memory bundle's ``negative_terms``) → every prompt
     naming a class the term names (the class, its plural); a term naming no class → global;
   - a policy rewrite → the prompt feature it acts on (``move_negations`` → negation,
     ``bind_attributes`` → colour, ``spell_counts``/``enumerate_instances`` → count,
     ``quote_text`` → text, ``compress`` → long prompts); the template, parameters, extractor
     and token budget → every prompt (global);
   - a tool → the features in its ``when``; a skill → its triggers (a feature trigger → that
     feature, a keyword naming a class → that class, anything else → global); a memory
     guideline → its trigger; memory bundles and middleware → every prompt (global).

2. **Probe prompts** (``probe_tasks``) in the style of GenEval's templates (Ghosh et al. 2023,
   "GenEval", ``prompts/create_prompts.py``): for a touched class *c*, "a photo of a *c*" (the
   class alone), "a photo of a *c* and a *o*" (with another object) and "a photo of two
   *c*\\ s" (with a count); for a touched feature, prompts with that feature over a fixed
   sample of classes; for global scope, one plain, one two-object and one counted prompt. The
   constraints a probe checks are read from its prompt by the runtime's fixed rule extractor
   (``RuleExtractor``), never from benchmark metadata, and only the *requested objects* (object
   and count constraints; on a class's probes, those of that class) are compared.

3. **The verdict** (``compare_probes``): per touched class (or feature), matched verdicts on
   the requested objects over probes × seeds, parent against candidate. When the candidate's
   net loss (verdicts lost minus verdicts gained) is at least ``ScopeConfig.min_lost`` (2) and
   at least ``min_drop`` (0.5) of the verdicts the parent passes, the patch breaks what it
   touches: a ``scope_regression``. Probes whose compiled program
   is unchanged produce identical images (same program, same seed), so only changed prompts can
   differ; the thresholds keep the residual sampling noise of changed prompts (a missed object
   in a few per cent of samples) from rejecting a sound patch. They are design choices.

Pure: executions go through the round's ``execute`` port.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from evoharness.evidence import EvidenceStatus
from evoharness.harness.patch import Patch
from evoharness.harness.schema import Harness
from evoharness.runtime.extract import RuleExtractor
from evoharness.tasks.models import ConstraintType, Task
from evoharness.trace.models import Execution
from evoharness.vocab import CLASSES, plural

#: The scope label of an op that touches every prompt.
GLOBAL = "*"

#: rewrite kind → the prompt feature it acts on (``evoharness.runtime.rewrite``).
REWRITE_FEATURE = {
    "move_negations": "negation",
    "bind_attributes": "color",
    "spell_counts": "count",
    "enumerate_instances": "count",
    "quote_text": "text",
    "compress": "long_prompt",
}
#: Policy fields that shape every prompt.
GLOBAL_POLICY = ("template", "params", "extractor", "max_prompt_tokens")
#: Object classes probed for a feature or global scope (a fixed, spread-out sample of the
#: 80 GenEval classes: animals, vehicles, furniture, food, small objects).
FEATURE_CLASSES = ("dog", "car", "chair", "apple", "cup", "bird")
#: The requested-object constraint types a probe compares.
REQUESTED = (ConstraintType.object, ConstraintType.count)

ExecuteFn = Callable[[Harness, Task, int], Execution]


class ScopeConfig(BaseModel):
    """Scope-probe settings. ``seeds``: how many seeds each probe runs on (the round passes
    its fresh look-1 validation seeds, ``evoharness.trace.round.propose_candidates``);
    ``max_classes``: touched classes probed at most; ``min_lost`` (verdicts) and ``min_drop``
    (a fraction of the parent's passing verdicts): the regression rule (module docstring)."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    seeds: int = Field(default=2, ge=1)
    max_classes: int = Field(default=4, ge=1)
    min_drop: float = Field(default=0.5, gt=0, le=1)
    min_lost: int = Field(default=2, ge=1)


@dataclass
class Scope:
    """What a patch touches: object ``classes``, prompt ``features`` and whether it is
    ``global_`` (every prompt); ``why`` says which op touched what."""

    classes: list[str] = field(default_factory=list)
    features: list[str] = field(default_factory=list)
    global_: bool = False
    why: list[str] = field(default_factory=list)

    def add_class(self, c: str, why: str) -> None:
        """Record class ``c`` (once) with the op that touched it."""
        if c not in self.classes:
            self.classes.append(c)
        self.why.append(why)

    def add_feature(self, f: str, why: str) -> None:
        """Record feature ``f`` (once) with the op that touched it."""
        if f not in self.features:
            self.features.append(f)
        self.why.append(why)

    def set_global(self, why: str) -> None:
        """Record that the patch touches every prompt."""
        self.global_ = True
        self.why.append(why)

    @property
    def empty(self) -> bool:
        """True when the patch touches nothing a probe can exercise."""
        return not (self.classes or self.features or self.global_)


def classes_named(text: str) -> list[str]:
    """The vocabulary classes (``evoharness.vocab.CLASSES``) ``text`` names as whole words,
    singular or plural, longest names first (``stop sign`` before ``sign``-less matches)."""
    low = text.lower()
    out: list[str] = []
    for c in sorted(CLASSES, key=len, reverse=True):
        for form in (c, plural(c)):
            if re.search(rf"(?<![\w]){re.escape(form)}(?![\w])", low):
                if c not in out:
                    out.append(c)
                break
    return out


def _terms(value: Any) -> list[str]:
    if isinstance(value, str):
        return [t.strip() for t in value.split(",") if t.strip()]
    if isinstance(value, list):
        return [t for v in value for t in _terms(v)]
    return []


def _resolve(doc: Any, parts: list[str]) -> Any:
    cur = doc
    for p in parts:
        if isinstance(cur, list):
            if p == "-" or not p.isdigit() or int(p) >= len(cur):
                return None
            cur = cur[int(p)]
        elif isinstance(cur, dict):
            if p not in cur:
                return None
            cur = cur[p]
        else:
            return None
    return cur


def _walk_terms(value: Any) -> list[str]:
    """Negative terms anywhere inside ``value`` (a skill effect, a bundle, a list of them)."""
    out: list[str] = []
    if isinstance(value, dict):
        if value.get("kind") == "negative_terms":
            out += _terms(value.get("value"))
        if "negative_terms" in value:
            out += _terms(value["negative_terms"])
        for k, v in value.items():
            if k != "negative_terms":
                out += _walk_terms(v)
    elif isinstance(value, list):
        for v in value:
            out += _walk_terms(v)
    return out


def _scope_terms(scope: Scope, terms: list[str], where: str) -> None:
    for t in terms:
        named = classes_named(t)
        for c in named:
            scope.add_class(c, f"{where}: negative term {t!r} names {c}")
        if not named:
            scope.set_global(f"{where}: negative term {t!r} applies to every prompt")


def _scope_triggers(scope: Scope, triggers: list[Any], where: str) -> None:
    if not triggers:
        scope.set_global(f"{where}: no trigger (always on)")
    for tr in triggers:
        kind = tr.get("kind") if isinstance(tr, dict) else None
        value = str(tr.get("value", "")) if isinstance(tr, dict) else ""
        if kind == "feature":
            scope.add_feature(value, f"{where}: trigger feature {value}")
        elif kind == "keyword" and classes_named(value):
            for c in classes_named(value):
                scope.add_class(c, f"{where}: trigger keyword {value!r}")
        else:
            scope.set_global(f"{where}: trigger {kind} {value!r}")


def derive_scope(parent: Harness, child: Harness, patch: Patch) -> Scope:
    """What ``patch`` (applied to ``parent``, giving ``child``) touches; see the module
    docstring for the rules. Both documents are read so a removed or replaced item's scope is
    that of what was there before and what is there after."""
    scope = Scope()
    docs = (parent.model_dump(mode="json"), child.model_dump(mode="json"))
    for op in patch.ops:
        path = str(op.get("path", ""))
        parts = [p.replace("~1", "/").replace("~0", "~") for p in path.strip("/").split("/")]
        where = f"{op.get('op', '?')} {path}"
        head = parts[0] if parts else ""
        sub = parts[1] if len(parts) > 1 else ""
        olds = [_resolve(docs[0], parts[:3]), _resolve(docs[1], parts[:3])]
        if parts[-1] == "-":
            olds.append(op.get("value"))
        if head == "policy" and sub == "negative_terms":
            items = [_resolve(d, parts[:2]) for d in docs]
            before, after = (set(_terms(x)) for x in items)
            _scope_terms(scope, sorted(before ^ after), where)
        elif head == "policy" and sub == "rewrites":
            kinds = {x.get("kind") for x in olds if isinstance(x, dict)}
            if len(parts) == 2:
                kinds |= {r.get("kind") for d in docs for r in (d["policy"]["rewrites"] or [])}
            for k in sorted(str(k) for k in kinds if k):
                feat = REWRITE_FEATURE.get(k)
                if feat:
                    scope.add_feature(feat, f"{where}: rewrite {k} acts on {feat} prompts")
                else:
                    scope.set_global(f"{where}: rewrite {k}")
        elif head == "policy":
            scope.set_global(f"{where}: policy {sub or 'document'} shapes every prompt")
        elif head == "tools":
            for t in (x for x in olds if isinstance(x, dict)):
                when = t.get("when") or []
                for f in when:
                    scope.add_feature(str(f), f"{where}: tool {t.get('name')} runs on {f}")
                if not when:
                    scope.set_global(f"{where}: tool {t.get('name')} runs on every prompt")
            if not any(isinstance(x, dict) for x in olds):
                scope.set_global(f"{where}: tools")
        elif head == "skills":
            skills = [x for x in olds if isinstance(x, dict)]
            if not skills:
                scope.set_global(f"{where}: skills")
            for s in skills:
                _scope_triggers(scope, list(s.get("triggers") or []), where)
                _scope_terms(scope, _walk_terms(s.get("effects")), where)
        elif head == "memory" and sub == "guidelines":
            gls = [x for x in olds if isinstance(x, dict)]
            for g in gls:
                _scope_triggers(scope, [{"kind": "feature", "value": g.get("trigger")}], where)
            if not gls:
                scope.set_global(f"{where}: memory guidelines")
        elif head == "memory":
            scope.set_global(f"{where}: memory retrieval applies to every similar prompt")
            for b in (x for x in olds if isinstance(x, dict | list)):
                _scope_terms(scope, _walk_terms(b), where)
        else:
            scope.set_global(f"{where}: {head} acts on every request")
    return scope


def _other(c: str, avoid: Sequence[str]) -> str:
    h = int(hashlib.sha256(c.encode()).hexdigest(), 16)
    pool = [x for x in FEATURE_CLASSES + CLASSES if x != c and x not in avoid]
    return pool[h % len(pool)]


def _a(word: str) -> str:
    return ("an " if word[0] in "aeiou" else "a ") + word


_FEATURE_PROMPTS: dict[str, Callable[[str, str], str]] = {
    "count": lambda c, o: f"a photo of three {plural(c)}",
    "color": lambda c, o: f"a photo of a red {c} and a blue {o}",
    "position": lambda c, o: f"a photo of {_a(c)} left of {_a(o)}",
    "text": lambda c, o: f'a photo of {_a(c)} next to a board with the text "OPEN"',
    "negation": lambda c, o: f"a photo of {_a(c)} without {_a(o)}",
    "multi_object": lambda c, o: f"a photo of {_a(c)} and {_a(o)}",
    "long_prompt": lambda c, o: (
        f"a photo of {_a(c)} and {_a(o)} in a quiet sunlit room, soft natural light, "
        "realistic textures and subtle shadows, captured with a fifty millimetre lens at eye "
        "level, shallow depth of field, warm colour grading, fine film grain, high detail, "
        "calm atmosphere, tidy composition, gentle reflections, a plain wall behind them"
    ),
}


def probe_tasks(scope: Scope, max_classes: int = 4) -> list[Task]:
    """Probe tasks for ``scope`` (module docstring, step 2), at most ``max_classes`` touched
    classes. Task ids are ``probe/<kind>/<name>/<i>``; ``task_family`` is ``probe:<name>``
    (the class or feature the verdict is grouped by); constraints come from
    ``RuleExtractor().extract(prompt)``. Deterministic."""
    ex = RuleExtractor()
    specs: list[tuple[str, str, str]] = []
    touched = scope.classes[:max_classes]
    for c in touched:
        o = _other(c, scope.classes)
        specs += [
            ("class", c, f"a photo of {_a(c)}"),
            ("class", c, f"a photo of {_a(c)} and {_a(o)}"),
            ("class", c, f"a photo of two {plural(c)}"),
        ]
    for f in scope.features:
        make = _FEATURE_PROMPTS.get(f)
        if make is None:
            continue
        for c in FEATURE_CLASSES[:2]:
            specs.append(("feature", f, make(c, _other(c, (c,)))))
    if scope.global_:
        c, o = FEATURE_CLASSES[2], FEATURE_CLASSES[3]
        specs += [
            ("global", "all", f"a photo of {_a(c)}"),
            ("global", "all", f"a photo of {_a(o)} and {_a(FEATURE_CLASSES[4])}"),
            ("global", "all", f"a photo of two {plural(FEATURE_CLASSES[5])}"),
        ]
    out: list[Task] = []
    seen: set[str] = set()
    for i, (kind, name, prompt) in enumerate(specs):
        if prompt in seen:
            continue
        seen.add(prompt)
        cons = [
            c
            for c in ex.extract(prompt)
            if c.type in REQUESTED and (kind != "class" or c.subject == name)
        ]
        if not cons:
            continue
        out.append(
            Task(
                task_id=f"probe/{kind}/{name.replace(' ', '_')}/{i}",
                prompt=prompt,
                task_family=f"probe:{name}",
                constraints=cons,
            )
        )
    return out


@dataclass
class ScopeResult:
    """Outcome of the scope probes: ``ok`` False on a ``scope_regression``; ``detail`` names
    the broken class or feature with both pass rates; ``rates`` maps each probed group to
    ``(parent, candidate, lost, n)``; ``scope`` is what the patch touches."""

    ok: bool
    detail: str
    scope: Scope
    rates: dict[str, tuple[float, float, int, int]] = field(default_factory=dict)
    executions: int = 0


def scope_summary(result: ScopeResult) -> dict[str, Any]:
    """A JSON-able summary of ``result`` for the candidate's record and the report: ``ok``,
    ``detail``, ``scope`` (``global`` or the classes and features touched), ``groups``
    (probe group → [parent rate, candidate rate, verdicts lost, verdicts]) and
    ``executions``."""
    sc = result.scope
    touched = "every prompt" if sc.global_ else ", ".join([*sc.classes, *sc.features]) or "none"
    return {
        "ok": result.ok,
        "detail": result.detail,
        "scope": touched,
        "groups": {k: [float(x) for x in v] for k, v in sorted(result.rates.items())},
        "executions": result.executions,
    }


def compare_probes(
    parent_execs: Sequence[Execution],
    child_execs: Sequence[Execution],
    probes: Sequence[Task],
    cfg: ScopeConfig,
) -> dict[str, tuple[float, float, int, int]]:
    """Per probe group (``task_family``): parent and candidate pass rates over the requested
    objects, verdicts the candidate lost (parent pass → candidate fail) and the number of
    matched verdicts. Executions are matched on (task, seed, constraint)."""
    family = {t.task_id: t.task_family for t in probes}

    def verdicts(execs: Sequence[Execution]) -> dict[tuple[str, int, str], bool]:
        return {
            (e.task_id, e.seed, ev.constraint_id): ev.status is EvidenceStatus.passed
            for e in execs
            for ev in e.evidence
        }

    pv, cv = verdicts(parent_execs), verdicts(child_execs)
    groups: dict[str, list[tuple[bool, bool]]] = {}
    for k, p in pv.items():
        if k in cv:
            groups.setdefault(family[k[0]], []).append((p, cv[k]))
    out: dict[str, tuple[float, float, int, int]] = {}
    for g, pairs in sorted(groups.items()):
        n = len(pairs)
        lost = sum(1 for p, c in pairs if p and not c)
        out[g] = (sum(p for p, _ in pairs) / n, sum(c for _, c in pairs) / n, lost, n)
    return out


def _regressed(r: tuple[float, float, int, int], cfg: ScopeConfig) -> bool:
    parent_rate, child_rate, lost, n = r
    passed = round(parent_rate * n)
    net = round((parent_rate - child_rate) * n)  # lost - gained
    return lost >= cfg.min_lost and net >= cfg.min_lost and net >= cfg.min_drop * passed


def run_scope_probes(
    execute: ExecuteFn,
    parent: Harness,
    child: Harness,
    patch: Patch,
    seeds: Sequence[int],
    cfg: ScopeConfig | None = None,
) -> ScopeResult:
    """Derive the patch's scope, run parent and child on its probes (the first ``cfg.seeds``
    of ``seeds``) and apply the regression rule (module docstring). A patch whose scope is
    empty passes with no execution. Exceptions from ``execute`` propagate."""
    cfg = cfg or ScopeConfig()
    scope = derive_scope(parent, child, patch)
    probes = probe_tasks(scope, cfg.max_classes)
    if scope.empty or not probes:
        return ScopeResult(True, "nothing to probe", scope)
    use = list(seeds)[: cfg.seeds]
    pe = [execute(parent, t, s) for t in probes for s in use]
    ce = [execute(child, t, s) for t in probes for s in use]
    rates = compare_probes(pe, ce, probes, cfg)
    broken = [(g, r) for g, r in rates.items() if _regressed(r, cfg)]
    if broken:
        detail = "; ".join(
            f"{g.removeprefix('probe:')}: requested objects pass {r[1]:.2f} on probes vs "
            f"{r[0]:.2f} for the parent ({r[2]} of {r[3]} verdicts lost)"
            for g, r in broken
        )
        prompts = sorted({t.prompt for t in probes if t.task_family in {g for g, _ in broken}})
        return ScopeResult(
            False,
            f"{detail}; probes: {prompts}; scope: {'; '.join(scope.why)}",
            scope,
            rates,
            len(pe) + len(ce),
        )
    return ScopeResult(
        True, f"{len(probes)} probes, no regression", scope, rates, len(pe) + len(ce)
    )


__all__ = [
    "GLOBAL",
    "Scope",
    "ScopeConfig",
    "ScopeResult",
    "classes_named",
    "compare_probes",
    "derive_scope",
    "probe_tasks",
    "run_scope_probes",
    "scope_summary",
]
