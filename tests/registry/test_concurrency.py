"""Concurrent promotions to one channel: compare-and-set is exact under contention.

On PostgreSQL (required under CI=true) and SQLite: 20 threads each promote a different
registration to ``prod``, all expecting the same current registration — exactly one wins,
the other 19 get ``StalePromotion`` and write nothing. Then 20 threads each retry (re-reading
the channel) until their promotion lands — every one wins exactly once, the history has one
event per move with contiguous versions and nothing lost or duplicated.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from evoharness.harness.io import load_dir
from evoharness.local_store import LocalArtifactStore
from harness_registry import ChannelMove, Lineage, Registry, StalePromotion, open_registry

N = 20


def _registrations(registry: Registry, repo_root: Path, n: int) -> list[str]:
    base = load_dir(repo_root / "harnesses" / "baseline")
    return [
        registry.put(
            base.model_copy(update={"description": f"candidate {i}"}),
            Lineage(registered_by="concurrency-test"),
        ).registration.registration_id
        for i in range(n)
    ]


def _run_contention(url: str, tmp_path: Path, repo_root: Path) -> None:
    registry = open_registry(url, LocalArtifactStore(tmp_path / "blobs"))
    try:
        seed, *cands = _registrations(registry, repo_root, N + 1)
        registry.promote("prod", seed, expected_registration_id=None)
        barrier = threading.Barrier(N)

        def once(rid: str) -> str:
            barrier.wait()
            try:
                registry.promote(
                    "prod", rid, expected_registration_id=seed, move=ChannelMove(actor=rid)
                )
                return "won"
            except StalePromotion:
                return "stale"

        with ThreadPoolExecutor(N) as pool:
            outcomes = list(pool.map(once, cands))
        assert outcomes.count("won") == 1, outcomes
        winner = cands[outcomes.index("won")]
        state = registry.resolve("prod")
        assert (state.registration_id, state.version) == (winner, 2)
        hist = registry.history("prod")
        assert [(h.version, h.registration_id) for h in hist] == [(2, winner), (1, seed)]

        # phase 2: everybody retries until their promotion lands
        barrier2 = threading.Barrier(N)
        attempts: dict[str, int] = {}

        def until_won(rid: str) -> int:
            barrier2.wait()
            tries = 0
            while True:
                tries += 1
                cur = registry.resolve("prod")
                try:
                    st = registry.promote(
                        "prod",
                        rid,
                        expected_registration_id=cur.registration_id,
                        expected_version=cur.version,
                        move=ChannelMove(actor=rid),
                    )
                    attempts[rid] = tries
                    return st.version
                except StalePromotion:
                    continue

        with ThreadPoolExecutor(N) as pool:
            versions = list(pool.map(until_won, cands))
        assert sorted(versions) == list(range(3, 3 + N))
        hist = registry.history("prod")
        assert [h.version for h in hist] == list(range(2 + N, 0, -1))
        assert len(hist) == registry.count()["channel_events"] == N + 2
        assert sorted(h.actor for h in hist if h.version >= 3) == sorted(cands)
        # every event's "from" is the previous event's registration: no lost update
        chron = list(reversed(hist))
        for prev, nxt in zip(chron, chron[1:], strict=False):
            assert nxt.from_registration_id == prev.registration_id
        assert registry.resolve("prod").registration_id == chron[-1].registration_id
        assert registry.resolve("prod").version == N + 2
    finally:
        registry.engine.dispose()


def test_concurrent_promotions_postgresql(pg_url: str, tmp_path: Path, repo_root: Path) -> None:
    _run_contention(pg_url, tmp_path, repo_root)


def test_concurrent_promotions_sqlite(tmp_path: Path, repo_root: Path) -> None:
    _run_contention(f"sqlite:///{tmp_path / 'r.db'}", tmp_path, repo_root)
