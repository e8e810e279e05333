"""The main job's promotion (``evoharness_app.promotion``, issue 27 item 3 and issue 28's
swallowed registry error): a channel moves only to a harness that is better on the same
verdicts, and only a channel that was never promoted to reads as "nothing served"."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import SecretStr

from evoharness.harness.io import harness_id, load_dir
from evoharness_app.evaluation import SplitScore
from evoharness_app.promotion import PromotionError, decide_promotion, serving
from harness_registry import Lineage

CAND = ("reg-cand", "h-cand")
CUR = ("reg-cur", "h-cur")


def _scores(passed: dict[str, int], n: int = 40) -> dict[str, SplitScore]:
    """split → score with ``passed`` of ``n`` verdicts passing."""
    return {s: SplitScore(p / n, n, {"overall": 0.0, "per_tag": {}}, {}) for s, p in passed.items()}


def test_a_channel_that_serves_nothing_is_moved() -> None:
    d = decide_promotion("dev", CAND, None, _scores({"test": 1}), None)
    assert d.move and not d.forced and d.current_registration is None
    assert d.line == "promoted reg-cand to channel dev (the channel served nothing yet)"


def test_a_channel_already_serving_the_harness_is_left() -> None:
    d = decide_promotion("dev", CAND, ("reg-old", "h-cand"), _scores({"test": 1}), None)
    assert not d.move and "already serves this harness (reg-old)" in d.line


@pytest.mark.parametrize(
    ("cand", "cur", "move"), [(30, 29, True), (29, 29, False), (10, 29, False)]
)
def test_only_a_better_harness_moves_the_channel(cand: int, cur: int, move: bool) -> None:
    """Better = strictly more passed verdicts on the untouched test split; the evolution
    splits (which the run's own gates selected on) do not decide."""
    d = decide_promotion(
        "dev",
        CAND,
        CUR,
        _scores({"target": 40, "test": cand}),
        _scores({"target": 0, "test": cur}),
    )
    assert d.move is move and d.basis == "test split"
    assert (d.candidate_rate, d.current_rate) == (cand / 40, cur / 40)
    figures = f"{cand / 40:.3f} vs {cur / 40:.3f} constraint pass rate on the test split"
    assert figures in d.line
    if not move:
        assert d.line.startswith("channel dev not moved: this run's harness reg-cand is not")
        assert d.line.endswith("--force-promote moves it anyway")
        assert "\n" not in d.line


def test_force_promote_moves_a_harness_that_is_not_better() -> None:
    d = decide_promotion("dev", CAND, CUR, _scores({"test": 3}), _scores({"test": 30}), force=True)
    assert d.move and d.forced
    assert "(--force-promote)" in d.line and "although it is not better" in d.line
    assert d.to_doc()["forced"] is True


def test_without_a_test_split_the_splits_are_pooled() -> None:
    d = decide_promotion(
        "dev",
        CAND,
        CUR,
        _scores({"target": 10, "heldout": 12}),
        _scores({"target": 11, "heldout": 10}),
    )
    assert d.move and d.basis == "heldout+target splits pooled"
    assert d.candidate_rate == 22 / 80


def test_scores_on_other_verdicts_are_refused() -> None:
    with pytest.raises(ValueError, match="not comparable"):
        decide_promotion("dev", CAND, CUR, _scores({"test": 3}), _scores({"test": 3}, n=41))


@pytest.fixture
def registry_server(tmp_path: Path) -> Iterator[str]:
    """A registry gRPC server (SQLite, documents on the filesystem) that requires the bearer
    token ``right``; yields its address."""
    from evoharness.local_store import LocalArtifactStore
    from harness_registry import Registry
    from harness_registry.db import make_engine, upgrade
    from services.common.server import ServiceRegistration, build_server
    from services.common.settings import ServerSettings
    from services.protos.evoharness.v1 import registry_pb2_grpc as pb_grpc
    from services.registry.server import SERVICE_NAME, HarnessRegistryServicer

    engine = make_engine(f"sqlite:///{tmp_path / 'registry.db'}")
    upgrade(engine)
    reg = Registry(engine, LocalArtifactStore(tmp_path / "blobs"))
    running = build_server(
        ServerSettings(port=0, metrics_port=-1, auth_token=SecretStr("right")),
        [
            ServiceRegistration(
                HarnessRegistryServicer(reg),
                pb_grpc.add_HarnessRegistryServicer_to_server,
                SERVICE_NAME,
            )
        ],
    )
    try:
        yield f"127.0.0.1:{running.port}"
    finally:
        running.stop(0)
        engine.dispose()


def test_only_a_channel_never_promoted_to_reads_as_nothing_served(
    registry_server: str, repo_root: Path
) -> None:
    """Issue 28: any registry error (here: the wrong token) read as "no channel yet", and
    the job promoted with ``expected=None``. Only NOT_FOUND means that; anything else
    names the channel, the registry and what failed."""
    from services.registry.client import RegistryClient

    with RegistryClient(registry_server, token="wrong") as bad:
        with pytest.raises(PromotionError, match=r"channel dev: could not read .*UNAUTHENTICATED"):
            serving(bad, "dev")
    with RegistryClient(registry_server, token="right") as client:
        assert serving(client, "dev") is None
        base = load_dir(repo_root / "harnesses" / "baseline")
        rid, hid, _ = client.put(base, Lineage(registered_by="test"))
        client.promote("dev", rid, expected=None)
        now = serving(client, "dev")
        assert now.registration_id == rid and harness_id(now.harness) == hid
