"""``evoharness registry ...`` on the embedded registry (SQLite + local documents)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evoharness.harness.io import harness_id, load_dir, save_dir
from evoharness.harness.patch import apply_patch
from evoharness_app.cli import main
from harness_registry.db import head_revision

PATCH = {
    "responsibility": "policy",
    "ops": [{"op": "replace", "path": "/policy/negative_prompt", "value": "blurry"}],
}


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, object]:
    code = main(list(args))
    out = capsys.readouterr()
    return code, (json.loads(out.out) if code == 0 and out.out.strip() else out.err)


def test_cli_put_promote_resolve_history_diff(
    tmp_path: Path, repo_root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    opts = ["--database-url", f"sqlite:///{tmp_path / 'r.db'}", "--blobs", str(tmp_path / "b")]
    base_dir = repo_root / "harnesses" / "baseline"
    variant = apply_patch(load_dir(base_dir), PATCH)
    save_dir(variant, tmp_path / "variant")
    (tmp_path / "patch.json").write_text(json.dumps(PATCH))

    code, a = run(capsys, "registry", "put", str(base_dir), "--registered-by", "t", *opts)
    assert code == 0 and a["created"] and a["harness_id"] == harness_id(load_dir(base_dir))
    code, again = run(capsys, "registry", "put", str(base_dir), "--registered-by", "t", *opts)
    assert again == {**a, "created": False}
    code, b = run(
        capsys,
        "registry",
        "put",
        str(tmp_path / "variant"),
        "--parent",
        a["registration_id"],
        "--patch",
        str(tmp_path / "patch.json"),
        "--name",
        "baseline+t.r1",
        "--description",
        "Evolved by hand: a negative prompt.",
        *opts,
    )
    assert code == 0 and b["created"]

    code, ev = run(capsys, "registry", "promote", "prod", a["registration_id"], *opts)
    assert code == 0 and ev["version"] == 1
    code, ev = run(capsys, "registry", "promote", "prod", b["registration_id"], *opts)
    assert code == 0 and ev["registration_id"] == b["registration_id"] and ev["version"] == 2
    # an explicit stale expectation fails with exit 1 and changes nothing
    code, err = run(
        capsys,
        "registry",
        "promote",
        "prod",
        a["registration_id"],
        "--expect",
        a["registration_id"],
        *opts,
    )
    assert code == 1 and "StalePromotion" in str(err)
    code, res = run(capsys, "registry", "resolve", "prod", *opts)
    assert res["registration_id"] == b["registration_id"] and res["version"] == 2
    code, ev = run(capsys, "registry", "promote", "prod", "--rollback", *opts)
    assert code == 0 and ev["registration_id"] == a["registration_id"]
    code, hist = run(capsys, "registry", "history", "prod", *opts)
    assert [h["version"] for h in hist] == [3, 2, 1]
    code, d = run(capsys, "registry", "diff", a["registration_id"], b["registration_id"], *opts)
    assert d == {"policy": PATCH["ops"]}
    code, got = run(
        capsys, "registry", "get", b["registration_id"], "--out", str(tmp_path / "out"), *opts
    )
    assert got["parent_id"] == a["registration_id"]
    assert load_dir(tmp_path / "out") == load_dir(tmp_path / "variant")
    code, lst = run(capsys, "registry", "list", "--json", *opts)
    assert [r["registration_id"] for r in lst] == [b["registration_id"], a["registration_id"]]
    # b has a name and description of its own; a (none given) shows the document's name
    assert [(r["name"], r["description"]) for r in lst] == [
        ("baseline+t.r1", "Evolved by hand: a negative prompt."),
        ("baseline", ""),
    ]
    assert main(["registry", "list", *opts]) == 0  # a table by default
    table = capsys.readouterr().out
    assert "registration" in table and "parent" in table and "description" in table
    rows = [line for line in table.splitlines() if "reg-" in line]
    assert [line.split()[1] for line in rows] == [b["registration_id"], a["registration_id"]]
    assert a["registration_id"] in rows[0]  # b's parent
    assert "baseline+t.r1" in rows[0] and "Evolved by hand" in table
    code, err = run(capsys, "registry", "get", "reg-missing", *opts)
    assert code == 1 and "reg-missing" in str(err)


def test_cli_migrate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = ["--database-url", f"sqlite:///{tmp_path / 'm.db'}"]
    code, out = run(capsys, "registry", "migrate", *url)
    assert code == 0 and out["revision"] == head_revision()
    code, out = run(capsys, "registry", "migrate", "--down", "base", *url)
    assert code == 0 and out["revision"] is None
    code, err = run(capsys, "registry", "migrate", "--to", "9999", *url)
    assert code == 1 and "9999" in str(err)


def test_cli_canary_with_weight_zero_is_refused(
    tmp_path: Path, repo_root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 27 item 13a: ``--canary B --weight 0`` serves the canary nothing; it was accepted
    silently. It is refused with the valid range and the channel is left as it was."""
    opts = ["--database-url", f"sqlite:///{tmp_path / 'r.db'}", "--blobs", str(tmp_path / "b")]
    base_dir = repo_root / "harnesses" / "baseline"
    save_dir(apply_patch(load_dir(base_dir), PATCH), tmp_path / "variant")
    _, a = run(capsys, "registry", "put", str(base_dir), "--registered-by", "t", *opts)
    parent = ["--parent", a["registration_id"]]  # type: ignore[index]
    _, b = run(capsys, "registry", "put", str(tmp_path / "variant"), *parent, *opts)
    rid_a, rid_b = a["registration_id"], b["registration_id"]  # type: ignore[index]
    assert run(capsys, "registry", "promote", "prod", rid_a, *opts)[0] == 0
    code, err = run(
        capsys, "registry", "promote", "prod", rid_a, "--canary", rid_b, "--weight", "0", *opts
    )
    assert code == 1 and "canary_weight" in str(err) and "(0, 1]" in str(err), err
    code, res = run(capsys, "registry", "resolve", "prod", *opts)
    assert res["version"] == 1 and res["canary_registration_id"] is None  # type: ignore[index]
