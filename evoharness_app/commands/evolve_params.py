"""Reading and checking an ``evolve start`` parameters file, and the figures of its budget
dry run (``evolve start --dry-run-budget``): ``budget_config`` builds a
``evoharness.trace.budget.BudgetConfig`` from the document, taking every field the document
leaves out from ``workflows.params.EvolutionParams``'s defaults (the one place for the run
defaults). Used by ``evoharness_app.commands.evolve`` and ``evolve local``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import typer
import yaml

from evoharness.harness.io import HarnessError, got, load_dir, loads, yaml_error
from evoharness.harness.schema import BestOfNStage, Harness, VerifyAndRepairStage
from evoharness.tasks.io import load_tasks
from evoharness.tasks.models import Task
from evoharness.tasks.splits import EVOLUTION_SPLITS
from evoharness.trace.budget import BudgetConfig, estimate_budget
from evoharness_app.errors import InputError


def run_id_option(value: str) -> str:
    """Typer callback of every run id a CLI verb takes (``--run-id``, a ``RUN_ID`` argument):
    ``value`` when ``workflows.store_keys.check_run_id`` accepts it or it is empty (the verb
    makes one); else ``typer.BadParameter`` (a usage error, exit 2), before anything starts."""
    from workflows.store_keys import check_run_id

    if not value:
        return value
    try:
        return check_run_id(value)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None


def read_params_doc(path: Path) -> dict[str, Any]:
    """The parameters document in ``path`` (JSON or YAML). Raises ``InputError`` naming the
    file for a missing file or invalid syntax."""
    if not path.is_file():
        raise InputError(f"{path}: no such file")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not UTF-8 (byte {exc.start})") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror or exc}") from None
    try:
        doc = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}: not valid json: {exc}") from None
    except yaml.YAMLError as exc:
        raise InputError(str(yaml_error(path, exc, "YAML"))) from None
    if not isinstance(doc, dict):
        raise InputError(f"{path}: top level must be a mapping")
    return doc


def _count(split: dict[str, Any] | None, name: str, where: Path) -> int:
    if not split:
        return 0
    if split.get("tasks") is not None:
        return len(split["tasks"])
    uri = str(split.get("uri", ""))
    u = urlparse(uri)
    if u.scheme == "file":
        try:
            return len(load_tasks(u.path))
        except (OSError, ValueError) as exc:
            raise InputError(f"{where}: splits.{name}: {exc}") from None
    raise InputError(
        f"{where}: splits.{name} is {uri!r}; a dry run reads only inline tasks or file:// "
        f"splits (it calls nothing) — pass --n-{name}"
    )


def _calls_per_execution(doc: dict[str, Any], where: Path) -> float:
    """Generator calls per execution of the parameters' harness (best-of-N × (1 + repair
    budget)); 1 when the harness cannot be read here (an ``s3://`` URI, or a ``file://``
    path of another machine under ``--remote-paths``: said on stderr)."""
    ref = doc.get("harness") or {}
    h: Harness | None = None
    try:
        if ref.get("document") is not None:
            h = Harness.model_validate(ref["document"])
        elif str(ref.get("uri", "")).startswith("file://"):
            p = Path(urlparse(ref["uri"]).path)
            if not p.exists():
                typer.echo(
                    f"note: {where}: harness {ref['uri']} is not on this machine; the estimate "
                    "assumes 1 generator call per execution (no best-of-N or repair)",
                    err=True,
                )
                return 1.0
            h = load_dir(p) if p.is_dir() else loads(p.read_bytes(), str(p))
    except OSError as exc:
        raise InputError(f"{where}: harness: {exc.strerror or exc}") from None
    except (HarnessError, ValueError) as exc:
        raise InputError(f"{where}: harness: {exc}") from None
    if h is None:
        return 1.0
    n, repairs = 1, 0
    for s in h.middleware.stages:
        if isinstance(s, BestOfNStage):
            n = s.n
        if isinstance(s, VerifyAndRepairStage):
            repairs = s.repair_budget
    return float(n * (1 + repairs))


def budget_config(doc: dict[str, Any], where: Path, **counts: int | None) -> BudgetConfig:
    """``BudgetConfig`` from a parameters document (counts of tasks per split, seeds, rounds,
    clusters, candidates, proposer, generator calls per execution from the harness's
    middleware); ``counts`` (``target``/``heldout``/``preservation``) override split sizes."""
    splits = doc.get("splits") or {}
    n = {
        name: counts.get(name)
        if counts.get(name) is not None
        else _count(splits.get(name), name, where)
        for name in EVOLUTION_SPLITS
    }
    if not n["target"]:
        raise InputError(f"{where}: splits.target is empty")
    backends = doc.get("backends") or {}
    from workflows.params import EvolutionParams

    # BudgetConfig field -> the parameters' field it comes from (named in errors); an absent
    # field takes EvolutionParams' default (the run's defaults are defined there once)
    fields = {
        "rounds": "max_rounds",
        "max_clusters": "max_clusters",
        "candidates_per_cluster": "candidates_per_cluster",
        "beam": "beam",
    }
    defaults = {
        key: EvolutionParams.model_fields[key].get_default(call_default_factory=True)
        for key in (*fields.values(), "seeds")
    }
    ints: dict[str, int] = {}
    for name, key in fields.items():
        value = doc.get(key, defaults[key])
        if isinstance(value, bool) or not isinstance(value, int):
            raise InputError(f"{where}: {key}: expected an integer, got {value!r}")
        ints[name] = value
    from pydantic import ValidationError

    try:
        return BudgetConfig.model_validate(
            {
                "n_target": int(n["target"] or 0),
                "n_heldout": int(n["heldout"] or 0),
                "n_preservation": int(n["preservation"] or 0),
                "seeds": len(doc.get("seeds") or defaults["seeds"]),
                "generator_calls_per_execution": _calls_per_execution(doc, where),
                "proposer": "llm"
                if backends.get("proposer", "rule") not in ("rule", "hostile")
                else "rule",
                **ints,
            }
        )
    except ValidationError as exc:
        err = exc.errors()[0]
        name = str(err["loc"][0]) if err["loc"] else ""
        key = fields.get(name, name)
        raise InputError(f"{where}: {key}: {err['msg']}{got(err)}") from None


def refuse_small_budget(
    doc: dict[str, Any], where: Path, budget: Any, **counts: int | None
) -> None:
    """Refuse, before anything starts, a run whose money, generator-call or
    generator-seconds budget is below the dry-run estimate of one round, or whose wall-time
    budget is not above 0 s (``evoharness.trace.run_budget.refuse_too_small``): ``InputError``
    naming ``where`` (the parameters file, or the command), the budget, its value and the
    estimate. ``budget``:
    the run's ``RunBudget`` (``EvolutionParams.run_budget()``); ``doc`` and ``counts`` as
    ``budget_config`` takes them. When the splits cannot be counted here (``s3://``), says
    on stderr that the budget was not checked."""
    from evoharness.trace.run_budget import BudgetTooSmall, refuse_too_small

    if all(
        getattr(budget, k) is None
        for k in (
            "budget_usd",
            "budget_generator_calls",
            "budget_generator_seconds",
            "budget_wall_s",
        )
    ):
        return
    one = None
    try:
        cfg = budget_config(doc, where, **counts).model_copy(update={"rounds": 1})
        one = estimate_budget(cfg).expected
    except InputError as exc:
        typer.echo(f"note: budget not checked against one round's estimate: {exc}", err=True)
    try:
        refuse_too_small(budget, one)
    except BudgetTooSmall as exc:
        raise InputError(f"{where}: {exc}") from None


def check_local_uris(doc: dict[str, Any], where: Path) -> None:
    """Raise ``InputError`` naming the field when a ``file://`` URI of the parameters names
    nothing on this machine (``configs/evolution.yaml``'s ``/app/...`` paths exist only inside
    the container image)."""
    refs = [("harness", doc.get("harness") or {})] + [
        (f"splits.{name}", src or {}) for name, src in (doc.get("splits") or {}).items()
    ]
    refs += [(f"scored_on[{i}]", src or {}) for i, src in enumerate(doc.get("scored_on") or [])]
    for field, ref in refs:
        uri = str(ref.get("uri") or "") if isinstance(ref, dict) else ""
        if uri.startswith("file://") and not Path(urlparse(uri).path).exists():
            raise InputError(
                f"{where}: {field}.uri {uri}: does not exist on this machine (write your "
                "own parameters with `evoharness evolve init`, or pass --remote-paths when "
                "the worker reads another filesystem)"
            )


def check_overlap_here(p: Any, where: Path) -> None:
    """Run the workflow's overlap check (``evoharness.tasks.overlap.refuse_overlap``, the
    run's ``overlap`` settings) of the evolution splits against ``scored_on`` before a run is
    started, when every split and scored-on source is inline or a ``file://`` path on this
    machine (else the workflow checks it). Raises ``InputError`` naming the parameters file
    with the workflow's list of overlapping prompts."""
    from evoharness.tasks.overlap import OverlapError, refuse_overlap

    if not p.scored_on:
        return

    def read(src: Any, what: str) -> list[Task] | None:
        if src.tasks is not None:
            return list(src.tasks)
        u = urlparse(str(src.uri))
        if u.scheme != "file":
            return None
        try:
            return load_tasks(u.path)
        except (OSError, ValueError) as exc:
            raise InputError(f"{where}: {what}: {exc}") from None

    splits = {n: read(getattr(p.splits, n), f"splits.{n}") for n in EVOLUTION_SPLITS}
    scored = [read(src, f"scored_on[{i}]") for i, src in enumerate(p.scored_on)]
    if any(v is None for v in [*splits.values(), *scored]):
        return  # an s3:// source: the workflow's load_inputs checks it
    try:
        refuse_overlap(
            {n: v or [] for n, v in splits.items()},
            [t for ts in scored for t in ts or []],
            p.overlap,
        )
    except OverlapError as exc:
        raise InputError(f"{where}: {exc}") from None
