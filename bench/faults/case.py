"""Fault-suite cases: the YAML format, its loader, and how a case becomes harnesses and splits.

A case is one YAML file (``<name>.yaml``) or a directory holding ``case.yaml`` (plus, when
it wants, its own base harness directory). Fields (``Case``; every model forbids unknown
fields):

- ``profile``: generator profile name (``sdxl-like``, ``sd15-like``, ``flux-like``, …);
- ``base``: ``baseline`` / ``reference`` (the shipped ``harnesses/<name>``), ``@<name>``
  (a suite base under ``bench/faults/bases/<name>``) or a harness directory path relative
  to the case file;
- ``faults``: list of ``{responsibility, patch: [RFC 6902 ops], note}``, applied in order
  with ``evoharness.harness.patch.apply_patch`` (an op outside the fault's boundary contract
  is a case error) and checked with the runtime's static compile check;
- ``tasks``: a builder spec (``TaskSpec``) or the path of a split folder written by
  ``evoharness prepare-splits`` (``target.jsonl``, ``heldout.jsonl``, ``preservation.jsonl``);
- ``seeds``: K matched seeds (default 4);
- ``expect``: ``no_patch`` for a clean case, else one ``{responsibility, also_acceptable}``
  per fault (same order);
- ``why``: free text (what breaks, what a user would see, whether the rule-based proposer
  has a rule for it).

``load_case`` raises ``CaseError`` naming the file and the field (``faults[1].patch``,
``tasks.sizes.target``, …) for anything malformed; nothing is half-loaded.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from evoharness.harness.io import HarnessError, load_dir
from evoharness.harness.patch import Patch, PatchError, apply_patch
from evoharness.harness.schema import Harness, Responsibility
from evoharness.runtime.runtime import HarnessCompileError, check_harness
from evoharness.tasks.builders import BuildError, build_geneval
from evoharness.tasks.io import TaskFileError, load_tasks
from evoharness.tasks.models import Task
from evoharness.tasks.splits import stratified_order
from evoharness.tasks.synthetic import build_synthetic

ROOT = Path(__file__).resolve().parents[2]
#: Shipped harnesses a case may name as ``base``.
SHIPPED_BASES = ("baseline", "reference")
#: Suite-local bases (``base: "@<name>"``).
SUITE_BASES = Path(__file__).resolve().parent / "bases"
#: Synthetic tasks are drawn from ``build_synthetic(SYNTHETIC_SEED, SYNTHETIC_COUNT)``
#: (40 per family), so every case sees the same pool.
SYNTHETIC_SEED = 0
SYNTHETIC_COUNT = 240

CaseKind = Literal["clean", "single", "compound"]


class CaseError(ValueError):
    """A malformed case: the message starts with the case file and names the field."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Fault(_Strict):
    """One injected fault: RFC 6902 ``patch`` ops inside ``responsibility``'s contract."""

    responsibility: Responsibility
    patch: list[dict[str, Any]] = Field(min_length=1)
    note: str = ""


class Expectation(_Strict):
    """What a correct decision attributes and patches for one fault; ``also_acceptable``
    lists responsibilities where the fault can honestly be fixed too."""

    responsibility: Responsibility
    also_acceptable: list[Responsibility] = Field(default_factory=list)


class TaskSource(_Strict):
    """A task pool: ``dataset`` (``geneval`` or ``synthetic``) filtered to ``families``
    (GenEval tags / synthetic families; empty = all)."""

    dataset: Literal["geneval", "synthetic"]
    families: list[str] = Field(default_factory=list)


class Sizes(_Strict):
    """Tasks per split."""

    target: int = Field(ge=1, le=200)
    held_out: int = Field(ge=1, le=200)
    preservation: int = Field(default=0, ge=0, le=200)


class TaskSpec(TaskSource):
    """Target and held-out tasks from ``dataset``/``families`` (disjoint, seeded
    family-stratified order, ``evoharness.tasks.splits.stratified_order(split_seed)``);
    preservation tasks from ``preservation`` (default: GenEval single and two objects),
    never a target or held-out task."""

    sizes: Sizes
    preservation: TaskSource = Field(
        default_factory=lambda: TaskSource(
            dataset="geneval", families=["single_object", "two_object"]
        )
    )
    split_seed: int = 0


class Case(_Strict):
    """A fault-suite case (see the module docstring)."""

    profile: str = Field(min_length=1)
    base: str = Field(min_length=1)
    faults: list[Fault] = Field(default_factory=list)
    tasks: TaskSpec | str
    seeds: int = Field(default=4, ge=2, le=32)
    expect: Literal["no_patch"] | list[Expectation]
    why: str = Field(min_length=1)

    @model_validator(mode="after")
    def _expect_matches_faults(self) -> Case:
        if self.expect == "no_patch":
            if self.faults:
                raise ValueError("expect is no_patch but the case has faults")
        elif len(self.expect) != len(self.faults):
            raise ValueError(
                f"expect has {len(self.expect)} entries for {len(self.faults)} fault(s): "
                "one per fault, or no_patch for a clean case"
            )
        return self

    @property
    def kind(self) -> CaseKind:
        """``clean`` (no fault), ``single`` or ``compound`` (two or more faults)."""
        return "clean" if not self.faults else "single" if len(self.faults) == 1 else "compound"

    def acceptable(self) -> set[str]:
        """Responsibilities whose attribution counts as correct (empty for a clean case)."""
        if self.expect == "no_patch":
            return set()
        out: set[str] = set()
        for e in self.expect:
            out.add(e.responsibility.value)
            out.update(r.value for r in e.also_acceptable)
        return out

    def expected(self) -> list[str]:
        """The injected responsibilities (``["no_patch"]`` for a clean case)."""
        if self.expect == "no_patch":
            return ["no_patch"]
        return [e.responsibility.value for e in self.expect]


@dataclass
class LoadedCase:
    """A validated case with its harnesses and splits built.

    ``base``: the unfaulted harness; ``faulted``: base with every fault applied (== base for
    a clean case); ``splits``: ``target``/``heldout``/``preservation`` → tasks."""

    case_id: str
    path: Path
    case: Case
    base: Harness
    faulted: Harness
    splits: dict[str, list[Task]]


def _loc(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part in ("TaskSpec", "str", "list[Expectation]", "literal['no_patch']"):
            continue  # union branch tags pydantic inserts
        else:
            out += f".{part}" if out else str(part)
    return out or "<case>"


def case_files(folder: str | Path) -> list[Path]:
    """The case files of ``folder``: each ``*.yaml`` directly in it and each
    ``<sub>/case.yaml``, sorted by path; ``folder`` may also be one case file. Raises
    ``CaseError`` when it does not exist or holds no case."""
    p = Path(folder)
    if p.is_file():
        return [p]
    if not p.is_dir():
        raise CaseError(f"{p}: no such case folder or file")
    found = sorted([*p.glob("*.yaml"), *p.glob("*/case.yaml")])
    if not found:
        raise CaseError(f"{p}: no case files (*.yaml or */case.yaml)")
    return found


def case_id_of(path: Path) -> str:
    """``<name>`` of ``<name>.yaml`` or of ``<name>/case.yaml``."""
    return path.parent.name if path.name == "case.yaml" else path.stem


def parse_case(path: str | Path) -> Case:
    """Read and validate one case file (no harness or task is built). Raises ``CaseError``
    naming the file, the line for YAML syntax errors, and the field for schema errors."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CaseError(f"{p}: cannot read: {exc}") from None
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + 1}" if mark is not None else ""
        raise CaseError(
            f"{p}{where}: invalid YAML: {getattr(exc, 'problem', None) or exc}"
        ) from None
    if not isinstance(doc, dict):
        raise CaseError(f"{p}: a case is a YAML mapping, got {type(doc).__name__}")
    try:
        return Case.model_validate(doc)
    except ValidationError as exc:
        errs = "; ".join(f"{_loc(tuple(e['loc']))}: {e['msg']}" for e in exc.errors())
        raise CaseError(f"{p}: {errs}") from None


def resolve_base(case: Case, path: Path) -> Path:
    """The harness directory ``case.base`` names (see the module docstring)."""
    if case.base in SHIPPED_BASES:
        return ROOT / "harnesses" / case.base
    if case.base.startswith("@"):
        return SUITE_BASES / case.base[1:]
    return (path.parent / case.base).resolve()


def apply_faults(base: Harness, faults: list[Fault], where: str) -> Harness:
    """``base`` with every fault applied in order (``apply_patch``, then the runtime's
    ``check_harness``). Raises ``CaseError`` naming ``where`` and ``faults[i]`` for an op
    outside the fault's contract, an op RFC 6902 rejects, a schema break, a harness the
    runtime cannot compile, or a fault that changes nothing."""
    h = base
    for i, f in enumerate(faults):
        try:
            child = apply_patch(
                h, Patch(responsibility=f.responsibility, ops=f.patch, rationale=f.note)
            )
            check_harness(child)
        except PatchError as exc:
            raise CaseError(f"{where}: faults[{i}].patch: {exc}") from None
        except HarnessCompileError as exc:
            raise CaseError(
                f"{where}: faults[{i}]: the faulted harness does not compile: {exc}"
            ) from None
        if child.to_document() == h.to_document():
            raise CaseError(f"{where}: faults[{i}].patch changes nothing")
        h = child
    return h


def shared_dir() -> Path:
    """The shared data folder: ``$EVOHARNESS_SHARED``, else the first ``shared`` folder beside
    the checkout or one level up (a worktree under ``wt/``)."""
    env = os.environ.get("EVOHARNESS_SHARED")
    if env:
        return Path(env)
    for cand in (ROOT.parent / "shared", ROOT.parent.parent / "shared"):
        if cand.is_dir():
            return cand
    return ROOT.parent / "shared"


@lru_cache(maxsize=4)
def _pool(dataset: str) -> tuple[Task, ...]:
    if dataset == "geneval":
        return tuple(build_geneval(shared_dir() / "data" / "geneval" / "evaluation_metadata.jsonl"))
    return tuple(build_synthetic(seed=SYNTHETIC_SEED, count=SYNTHETIC_COUNT))


def _select(src: TaskSource, where: str, field: str) -> list[Task]:
    try:
        pool = list(_pool(src.dataset))
    except BuildError as exc:
        raise CaseError(f"{where}: {field}.dataset: {exc}") from None
    known = sorted({t.task_family for t in pool})
    bad = [f for f in src.families if f not in known]
    if bad:
        raise CaseError(
            f"{where}: {field}.families: unknown {src.dataset} families {bad} ({known})"
        )
    return [t for t in pool if not src.families or t.task_family in src.families]


def build_splits(spec: TaskSpec | str, path: Path) -> dict[str, list[Task]]:
    """The case's ``target``/``heldout``/``preservation`` tasks. Raises ``CaseError`` (file
    and field) when a family is unknown, a pool is too small for its sizes, or a split
    folder is unreadable."""
    where = str(path)
    if isinstance(spec, str):
        folder = (path.parent / spec).resolve()
        out: dict[str, list[Task]] = {}
        for name in ("target", "heldout", "preservation"):
            f = folder / f"{name}.jsonl"
            if name == "preservation" and not f.exists():
                out[name] = []
                continue
            try:
                out[name] = load_tasks(f)
            except TaskFileError as exc:
                raise CaseError(f"{where}: tasks: {exc}") from None
        if not out["target"] or not out["heldout"]:
            raise CaseError(f"{where}: tasks: {folder} needs non-empty target and heldout")
        return out
    main = stratified_order(_select(spec, where, "tasks"), spec.split_seed)
    need = spec.sizes.target + spec.sizes.held_out
    if len(main) < need:
        raise CaseError(
            f"{where}: tasks.sizes: target + held_out = {need} but the pool has {len(main)} tasks"
        )
    used = {t.task_id for t in main[:need]}
    pres_pool = [
        t
        for t in stratified_order(_select(spec.preservation, where, "tasks.preservation"), 0)
        if t.task_id not in used
    ]
    if len(pres_pool) < spec.sizes.preservation:
        raise CaseError(
            f"{where}: tasks.sizes.preservation: {spec.sizes.preservation} but the pool has "
            f"{len(pres_pool)} tasks"
        )
    return {
        "target": main[: spec.sizes.target],
        "heldout": main[spec.sizes.target : need],
        "preservation": pres_pool[: spec.sizes.preservation],
    }


def case_harnesses(case: Case, path: Path) -> tuple[Harness, Harness]:
    """``(base, faulted)`` harnesses of ``case`` read from ``path`` (no task is built): the
    base ``resolve_base`` names and it with every fault applied (``apply_faults``). Raises
    ``CaseError`` naming the file for an unreadable base or a fault that does not apply."""
    try:
        base = load_dir(resolve_base(case, path))
    except HarnessError as exc:
        raise CaseError(f"{path}: base: {exc}") from None
    return base, apply_faults(base, case.faults, str(path))


def load_case(path: str | Path, sizes: Sizes | None = None) -> LoadedCase:
    """Parse, build the base harness, apply the faults and build the splits of one case.
    ``sizes``: replaces ``tasks.sizes`` of a builder spec (the suite at other task counts,
    ``run.py --sizes``); a split folder keeps its own tasks. Raises ``CaseError`` (file and
    field) for anything wrong, a pool too small for ``sizes`` included; see ``parse_case``,
    ``apply_faults`` and ``build_splits``."""
    p = Path(path)
    case = parse_case(p)
    if sizes is not None and isinstance(case.tasks, TaskSpec):
        case = case.model_copy(update={"tasks": case.tasks.model_copy(update={"sizes": sizes})})
    base, faulted = case_harnesses(case, p)
    return LoadedCase(
        case_id=case_id_of(p),
        path=p,
        case=case,
        base=base,
        faulted=faulted,
        splits=build_splits(case.tasks, p),
    )
