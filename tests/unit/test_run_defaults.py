"""The run defaults and split names come from one place each."""

from __future__ import annotations

from pathlib import Path

from evoharness.tasks.splits import EVOLUTION_SPLITS
from evoharness.trace.models import DEFAULT_MAX_ROUNDS, DEFAULT_SEEDS, Split
from evoharness_app.commands.evolve import budget_config
from workflows.params import EvolutionParams


def _default(key: str) -> object:
    return EvolutionParams.model_fields[key].get_default(call_default_factory=True)


def test_the_budget_dry_run_takes_the_run_defaults_of_evolution_params() -> None:
    cfg = budget_config({}, Path("params.json"), target=5, heldout=2, preservation=2)
    assert cfg.seeds == len(_default("seeds")) == len(DEFAULT_SEEDS)  # type: ignore[arg-type]
    assert cfg.rounds == _default("max_rounds") == DEFAULT_MAX_ROUNDS
    assert cfg.max_clusters == _default("max_clusters")
    assert cfg.candidates_per_cluster == _default("candidates_per_cluster")
    assert cfg.beam == _default("beam")


def test_a_changed_default_reaches_the_dry_run(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The dry run reads EvolutionParams, not a copy of its numbers."""
    monkeypatch.setattr(EvolutionParams.model_fields["beam"], "default", 5)
    cfg = budget_config({}, Path("params.json"), target=5, heldout=2, preservation=2)
    assert cfg.beam == 5


def test_split_names_are_the_split_enum() -> None:
    assert (
        EVOLUTION_SPLITS == tuple(s.value for s in Split) == ("target", "heldout", "preservation")
    )
