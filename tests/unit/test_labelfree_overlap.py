"""Label-free evolution and the overlap check (issue 16, "Label-free by default")."""

from __future__ import annotations

from pathlib import Path

import pytest

from evoharness.tasks.labelfree import LabelFreeError, extractor_id, label_free
from evoharness.tasks.models import Constraint, ConstraintType, Task
from evoharness.tasks.overlap import (
    MiniLMEmbedder,
    OverlapConfig,
    OverlapError,
    TfidfCharEmbedder,
    embedder,
    find_overlaps,
    refuse_overlap,
)


def _t(tid: str, prompt: str, *cons: Constraint, family: str = "f") -> Task:
    return Task(
        task_id=tid,
        prompt=prompt,
        task_family=family,
        constraints=list(cons),
        metadata={"split": "target", "tag": "counting", "include": [{"class": "dog"}]},
    )


def test_label_free_reads_constraints_from_the_prompt_never_the_labels() -> None:
    wrong = Constraint(constraint_id="c0", type=ConstraintType.count, subject="cat", min_count=5)
    q = Constraint(constraint_id="quality", type=ConstraintType.quality, subject="image", value=0.5)
    tasks = [
        _t("a", "a photo of three dogs", wrong),
        _t("b", "a red car", q),
        _t("c", "an abstract mood", wrong),  # nothing to read: dropped
        _t("d", "an abstract mood, calm", q),  # only the quality check: kept
    ]
    out, summary = label_free(tasks)
    assert [t.task_id for t in out] == ["a", "b", "d"] and summary.dropped == ["c"]
    a = out[0]
    assert [(c.type.value, c.subject, c.min_count, c.max_count) for c in a.constraints] == [
        ("count", "dog", 3, 3)
    ]
    assert a.metadata == {"split": "target", "constraints_from": summary.extractor}
    assert a.prompt == tasks[0].prompt and a.task_family == "f"
    assert [c.type.value for c in out[1].constraints] == ["object", "color", "quality"]
    assert [c.type.value for c in out[2].constraints] == ["quality"]
    assert summary.extractor == extractor_id("rules-v1")
    assert (
        summary.extractor.startswith("rules-v1@")
        and len(summary.extractor) == len("rules-v1@") + 12
    )
    with pytest.raises(LabelFreeError, match="'nope' is not one of"):
        label_free(tasks, "nope")


def test_label_free_counts_what_no_constraint_checks_per_kind() -> None:
    """A verb and an attribute word outside the texture list end in uncertain marks, counted
    per kind in the summary and in the run's mode line (issue 30)."""
    from workflows.params import EvolutionMode

    tasks = [_t("a", "a turtle playing with a penguin"), _t("b", "six sparkling sheep")]
    _, summary = label_free(tasks)
    assert summary.uncertain == {"action": 1, "attribute": 1}
    mode = EvolutionMode(extractor=summary.extractor, read=2, uncertain=summary.uncertain)
    assert "marked uncertain), per kind: action 1, attribute 1" in mode.describe()
    assert "per kind" not in EvolutionMode(extractor="x", read=2).describe()


def test_exact_and_near_duplicates_are_found_and_refused() -> None:
    scored = [
        _t("s0", "a photo of a bicycle"),
        _t("s1", "a photo of a dog left of a cat"),
        _t("s2", "a photo of an orange"),
    ]
    evolution = {
        "target": [
            _t("t0", "A photo of a Bicycle!"),  # exact after normalisation
            _t("t1", "a photo of a cat left of a dog"),  # same n-grams: cosine 1.0
            _t("t2", "a photo of three giraffes"),
        ],
        "heldout": [_t("h0", "a photo of an orange orange")],  # cosine 0.987
        "preservation": [_t("p0", "a photo of a red parking meter")],
    }
    found = find_overlaps(evolution, scored, OverlapConfig(method="tfidf-char"))
    assert [(o.split, o.task_id, o.scored_task_id, o.kind) for o in found] == [
        ("target", "t0", "s0", "exact"),
        ("target", "t1", "s1", "near"),
        ("heldout", "h0", "s2", "near"),
    ]
    assert found[1].cosine == pytest.approx(1.0) and 0.95 <= found[2].cosine < 1.0
    with pytest.raises(OverlapError) as err:
        refuse_overlap(evolution, scored, OverlapConfig(method="tfidf-char"))
    msg = str(err.value)
    assert msg.startswith("3 evolution prompt(s) overlap") and "t1" in msg and "h0" in msg
    ok = refuse_overlap({"target": evolution["target"][2:]}, scored, OverlapConfig())
    assert ok == "exact + tfidf-char(3-5) >= 0.95"
    # a stricter threshold catches the one-word difference too
    strict = find_overlaps(evolution, scored, OverlapConfig(threshold=0.5))
    assert {o.task_id for o in strict} >= {"t0", "t1", "h0"}
    assert find_overlaps(evolution, []) == []


def test_minilm_path_loads_a_local_encoder_and_never_downloads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The MiniLM embedder on a tiny random BERT saved to a local folder (the real
    all-MiniLM-L6-v2 folder is used the same way): vectors are L2-normalised, identical
    prompts score 1, ``auto`` picks it when a folder is configured."""
    from transformers import BertConfig, BertModel, BertTokenizerFast

    vocab = tmp_path / "vocab.txt"
    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "photo", "of", "dog", "cat", "red"]
    vocab.write_text("\n".join(words) + "\n")
    model_dir = tmp_path / "minilm"
    BertTokenizerFast(vocab_file=str(vocab)).save_pretrained(model_dir)
    cfg = BertConfig(
        vocab_size=len(words),
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
    )
    BertModel(cfg).save_pretrained(model_dir)
    emb = MiniLMEmbedder(str(model_dir))
    a, b = emb.embed(["a photo of a dog", "a red cat"], ["a photo of a dog"])
    assert a.shape == (2, 16) and b.shape == (1, 16)
    assert (a**2).sum(axis=1) == pytest.approx([1.0, 1.0], abs=1e-5)
    assert float(a[0] @ b[0]) == pytest.approx(1.0, abs=1e-5)
    monkeypatch.setenv("EVOHARNESS_MINILM_PATH", str(model_dir))
    assert isinstance(embedder(), MiniLMEmbedder)
    assert isinstance(embedder(OverlapConfig(method="tfidf-char")), TfidfCharEmbedder)
    monkeypatch.delenv("EVOHARNESS_MINILM_PATH")
    assert isinstance(embedder(), TfidfCharEmbedder)
    with pytest.raises(OverlapError, match="needs a local model folder"):
        embedder(OverlapConfig(method="minilm"))
    with pytest.raises(OverlapError, match="cannot load"):
        MiniLMEmbedder(str(tmp_path / "missing"))
