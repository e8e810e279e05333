"""CLI verbs ``registry put|get|list|history|diff|promote|resolve|migrate``.

They talk to the registry service over gRPC when ``--target host:port`` (or
``$EVOHARNESS_REGISTRY_TARGET``) is given, else to the embedded registry: SQLite at
``--database-url`` / ``$EVOHARNESS_DATABASE_URL`` (default
``~/.evoharness/registry.db``) with documents under ``--blobs`` (default
``~/.evoharness/blobs``). Output is JSON. Unknown ids, stale promotions and bad input exit 1
with a message naming what was wrong.

The imports of ``harness_registry`` and ``services`` happen inside the commands, so the rest
of the CLI starts without database and network code.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Annotated, Any

import typer

registry_app = typer.Typer(
    name="registry",
    help="Registered harness versions, lineage and channels (dev, staging, prod).",
    no_args_is_help=True,
)

Target = Annotated[
    str,
    typer.Option(
        "--target",
        envvar="EVOHARNESS_REGISTRY_TARGET",
        help="host:port of the registry service (empty = embedded registry)",
    ),
]
DatabaseUrl = Annotated[
    str,
    typer.Option(
        "--database-url",
        envvar="EVOHARNESS_DATABASE_URL",
        help="embedded registry database (SQLAlchemy URL)",
    ),
]
Blobs = Annotated[Path | None, typer.Option("--blobs", help="embedded registry document folder")]


def _echo(value: Any) -> None:
    typer.echo(json.dumps(value, indent=2, sort_keys=True, default=str))


def _db_error(database_url: str, exc: Exception) -> Exception:
    """One-line ``InputError`` for a database problem, the URL's password hidden."""
    from sqlalchemy.engine import make_url

    from evoharness_app.cli import InputError

    try:
        url = make_url(database_url).render_as_string(hide_password=True) if database_url else ""
    except Exception:  # unparsable: show nothing of it
        url = "<unparsable URL>"
    orig = getattr(exc, "orig", None) or exc
    reason = str(orig).strip().splitlines()[0] if str(orig).strip() else type(exc).__name__
    return InputError(f"--database-url {url or '(default SQLite)'}: {type(exc).__name__}: {reason}")


class _Backend:
    """The same verbs over a remote ``RegistryClient`` or a local ``Registry``."""

    def __init__(self, target: str, database_url: str, blobs: Path | None) -> None:
        self.remote: Any = None
        self.local: Any = None
        if target:
            from services.registry.client import RegistryClient

            self.remote = RegistryClient(
                target,
                token=os.environ.get("EVOHARNESS_TOKEN", ""),
                # set by `eval "$(evoharness env)"` when the stack runs TLS
                tls_ca_file=os.environ.get("EVOHARNESS_CLIENT__TLS_CA_FILE") or None,
            )
        else:
            from evoharness.local_store import LocalArtifactStore
            from harness_registry import open_registry
            from harness_registry.db import DEFAULT_HOME

            try:
                self.local = open_registry(
                    database_url or None, LocalArtifactStore(blobs or DEFAULT_HOME / "blobs")
                )
            except Exception as exc:  # SQLAlchemy: unparsable URL, unreachable database
                raise _db_error(database_url, exc) from None

    def __enter__(self) -> _Backend:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.remote is not None:
            self.remote.close()
        if self.local is not None:
            self.local.engine.dispose()


def _run(fn: Any) -> Any:
    """Call ``fn`` turning registry errors into ``InputError`` (exit 1)."""
    from evoharness_app.cli import InputError
    from harness_registry.errors import RegistryError

    try:
        return fn()
    except RegistryError as exc:
        raise InputError(f"{type(exc).__name__}: {exc}") from None


def _read_json(path: Path | None, what: str) -> Any:
    from evoharness_app.cli import InputError

    if path is None:
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise InputError(f"{path}: cannot read {what}: {exc}") from None


@registry_app.command("put")
def put(
    harness: Annotated[Path, typer.Argument(help="harness directory or JSON document")],
    parent: Annotated[str, typer.Option(help="parent registration id")] = "",
    patch: Annotated[Path | None, typer.Option(help="JSON file of the Patch applied")] = None,
    report: Annotated[Path | None, typer.Option(help="JSON round/gate report")] = None,
    workflow_id: Annotated[str, typer.Option(help="workflow id of the run")] = "",
    registered_by: Annotated[str, typer.Option(help="who or what registers it")] = "",
    note: Annotated[str, typer.Option(help="free text")] = "",
    name: Annotated[
        str, typer.Option(help="the registration's own name (default: the harness's name)")
    ] = "",
    description: Annotated[str, typer.Option(help="what this registration is")] = "",
    target: Target = "",
    database_url: DatabaseUrl = "",
    blobs: Blobs = None,
) -> None:
    """Register a harness with its lineage (identical content + lineage: no-op)."""
    from evoharness.harness.io import HarnessError, load_dir
    from evoharness_app.cli import InputError

    try:
        h = load_dir(harness)
    except HarnessError as exc:
        raise InputError(str(exc)) from None
    patch_doc = _read_json(patch, "patch")
    report_doc = _read_json(report, "report")
    registered_by = registered_by or os.environ.get("USER", "cli")
    from harness_registry import Lineage

    def lineage(report_ref: str = "") -> Lineage:
        return Lineage(
            parent_id=parent or None,
            patch=patch_doc,
            round_report_ref=report_ref,
            workflow_id=workflow_id,
            registered_by=registered_by,
            note=note,
            name=name,
            description=description,
        )

    with _Backend(target, database_url, blobs) as b:
        if b.remote is not None:
            rid, hid, created = _run(lambda: b.remote.put(h, lineage(), report=report_doc))
        else:
            from evoharness.canonical import canonical_json, sha256_hex

            ref = ""
            if report_doc is not None:
                data = canonical_json(report_doc)
                ref = f"reports/{sha256_hex(data)}.json"
                b.local.store.put(ref, data, "application/json")
            res = _run(lambda: b.local.put(h, lineage(ref)))
            rid, hid, created = (
                res.registration.registration_id,
                res.registration.harness_id,
                res.created,
            )
    _echo({"registration_id": rid, "harness_id": hid, "created": created})


@registry_app.command("get")
def get(
    ref: Annotated[str, typer.Argument(help="registration id (or harness id)")],
    out: Annotated[Path | None, typer.Option(help="write the harness directory here")] = None,
    target: Target = "",
    database_url: DatabaseUrl = "",
    blobs: Blobs = None,
) -> None:
    """Print a registration (and optionally write its harness as a directory)."""
    from evoharness.harness.io import save_dir

    with _Backend(target, database_url, blobs) as b:
        if b.remote is not None:
            reg, h = _run(lambda: b.remote.get(ref))
        else:
            if len(ref) == 64:
                regs = b.local.list(harness_id=ref, limit=1)
                ref = regs[0].registration_id if regs else ref
            reg = _run(lambda: b.local.get(ref))
            h = _run(lambda: b.local.get_harness(reg.registration_id))
    if out is not None:
        from evoharness.harness.io import HarnessError
        from evoharness_app.cli import InputError

        try:
            save_dir(h, out)
        except HarnessError as exc:
            raise InputError(f"--out {exc}") from None
    _echo(reg.model_dump(mode="json"))


@registry_app.command("list")
def list_(
    workflow_id: Annotated[str, typer.Option(help="only this workflow's")] = "",
    harness_id: Annotated[str, typer.Option(help="only registrations of this content")] = "",
    limit: Annotated[int, typer.Option(min=1, max=1000)] = 50,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
    target: Target = "",
    database_url: DatabaseUrl = "",
    blobs: Blobs = None,
) -> None:
    """Registrations, newest first: a table (id, created, name, harness id, parent, who
    registered it, description — else the note), or every field as JSON with ``--json``."""
    with _Backend(target, database_url, blobs) as b:
        if b.remote is not None:
            regs = _run(lambda: b.remote.list(workflow_id=workflow_id, harness_id=harness_id))
        else:
            regs = b.local.list(
                workflow_id=workflow_id or None, harness_id=harness_id or None, limit=limit
            )
    if as_json:
        _echo([r.model_dump(mode="json") for r in regs[:limit]])
        return
    from rich.console import Console
    from rich.table import Table

    table = Table("registration", "created (UTC)", "name", "harness", "parent", "by", "description")
    for r in regs[:limit]:
        table.add_row(
            r.registration_id,
            r.created_at.strftime("%Y-%m-%d %H:%M:%S"),
            r.name,
            r.harness_id[:12],
            r.parent_id or "-",
            r.registered_by or "-",
            r.description or r.note or "",
        )
    console = Console(width=None if Console().is_terminal else 200)
    console.print(table)
    if not regs:
        console.print("no registrations")


@registry_app.command("history")
def history(
    channel: Annotated[str, typer.Argument(help="channel name")],
    target: Target = "",
    database_url: DatabaseUrl = "",
    blobs: Blobs = None,
) -> None:
    """Every move of a channel, newest first."""
    with _Backend(target, database_url, blobs) as b:
        src = b.remote if b.remote is not None else b.local
        entries = _run(lambda: src.history(channel))
    _echo([e.model_dump(mode="json") for e in entries])


@registry_app.command("diff")
def diff(
    a: Annotated[str, typer.Argument(help="from: registration or harness id")],
    b_: Annotated[str, typer.Argument(metavar="B", help="to: registration or harness id")],
    target: Target = "",
    database_url: DatabaseUrl = "",
    blobs: Blobs = None,
) -> None:
    """RFC 6902 ops from A to B, grouped by responsibility (``header``: name, description)."""
    from evoharness.harness.patch import owner_of

    with _Backend(target, database_url, blobs) as b:
        if b.remote is not None:
            flat = _run(lambda: b.remote.diff(a, b_))
            ops: dict[str, list[Any]] = {}
            for op in flat:
                owner = owner_of(op["path"])
                ops.setdefault(owner.value if owner is not None else "header", []).append(op)
        else:
            ops = _run(lambda: b.local.diff(a, b_))
    _echo(ops)


def _canary_share(value: float) -> float:
    """``--weight`` as given when it is a finite number in 0..1; else ``typer.BadParameter``
    (exit 2) saying which: NaN, an infinity, or out of range (a range check alone would call
    NaN "more than 1")."""
    if math.isnan(value):
        raise typer.BadParameter(f"not a number ({value}); give a share in 0..1")
    if math.isinf(value):
        raise typer.BadParameter(f"not finite ({value}); give a share in 0..1")
    if not 0.0 <= value <= 1.0:
        raise typer.BadParameter(f"{value} is not in 0..1")
    return value


@registry_app.command("promote")
def promote(
    channel: Annotated[str, typer.Argument(help="channel name (dev, staging, prod, ...)")],
    registration_id: Annotated[str, typer.Argument(help="registration to serve")] = "",
    expect: Annotated[
        str,
        typer.Option(
            help="registration the channel must serve now ('none' = must not exist); "
            "default: what it serves when the command starts"
        ),
    ] = "",
    expect_version: Annotated[int, typer.Option(help="also require this version")] = 0,
    canary: Annotated[str, typer.Option(help="canary registration id")] = "",
    weight: Annotated[
        float, typer.Option(callback=_canary_share, help="canary share, in (0, 1] with --canary")
    ] = 0.0,
    rollback: Annotated[bool, typer.Option(help="serve the previous registration")] = False,
    reason: Annotated[str, typer.Option()] = "",
    actor: Annotated[str, typer.Option()] = "",
    target: Target = "",
    database_url: DatabaseUrl = "",
    blobs: Blobs = None,
) -> None:
    """Compare-and-set a channel to a registration (stale expectation: exit 1, no change)."""
    from evoharness_app.cli import InputError
    from harness_registry import ChannelMove
    from harness_registry.errors import NotFound, RegistryError

    if not rollback and not registration_id:
        raise InputError("promote: give a REGISTRATION_ID or --rollback")
    actor = actor or os.environ.get("USER", "cli")
    with _Backend(target, database_url, blobs) as b:
        src = b.remote if b.remote is not None else b.local
        expected: str | None
        if expect == "none":
            expected = None
        elif expect:
            expected = expect
        else:
            try:
                cur = (
                    src.resolve(channel)
                    if b.local is not None
                    else src.resolve(channel, with_document=False)
                )
                expected = cur.registration_id
            except NotFound:
                expected = None
            except RegistryError as exc:  # e.g. an invalid channel name
                raise InputError(f"{type(exc).__name__}: {exc}") from None
        if rollback:
            if expected is None:
                raise InputError(f"channel {channel!r} serves nothing; nothing to roll back")
            res = _run(
                lambda: (
                    src.rollback(channel, expected=expected, actor=actor, reason=reason)
                    if b.remote is not None
                    else src.rollback(
                        channel, expected_registration_id=expected, actor=actor, reason=reason
                    )
                )
            )
        elif b.remote is not None:
            res = _run(
                lambda: src.promote(
                    channel,
                    registration_id,
                    expected=expected,
                    expected_version=expect_version,
                    canary_registration_id=canary,
                    canary_weight=weight,
                    actor=actor,
                    reason=reason,
                )
            )
        else:
            res = _run(
                lambda: src.promote(
                    channel,
                    registration_id,
                    expected_registration_id=expected,
                    expected_version=expect_version or None,
                    canary_registration_id=canary or None,
                    canary_weight=weight,
                    move=ChannelMove(actor=actor, reason=reason),
                )
            )
    _echo(res.model_dump(mode="json") if hasattr(res, "model_dump") else res)


@registry_app.command("resolve")
def resolve(
    channel: Annotated[str, typer.Argument(help="channel name")],
    target: Target = "",
    database_url: DatabaseUrl = "",
    blobs: Blobs = None,
) -> None:
    """What a channel serves now (registration, canary, weight, version)."""
    with _Backend(target, database_url, blobs) as b:
        if b.remote is not None:
            r = _run(lambda: b.remote.resolve(channel, with_document=False))
            out = {
                "channel": r.channel,
                "registration_id": r.registration_id,
                "harness_id": r.harness_id,
                "version": r.version,
                "canary_registration_id": r.canary_registration_id,
                "canary_weight": r.canary_weight,
            }
        else:
            st = _run(lambda: b.local.resolve(channel))
            out = st.model_dump(mode="json")
            out["harness_id"] = b.local.get(st.registration_id).harness_id
    _echo(out)


@registry_app.command("migrate")
def migrate(
    database_url: DatabaseUrl = "",
    to: Annotated[str, typer.Option(help="target revision (upgrade)")] = "head",
    down: Annotated[str, typer.Option(help="downgrade to this revision instead")] = "",
) -> None:
    """Run the registry's Alembic migrations (e.g. as a deployment hook); print the revision."""
    from evoharness_app.cli import InputError
    from harness_registry.db import current_revision, downgrade, make_engine, upgrade

    try:
        engine = make_engine(database_url or None)
    except Exception as exc:
        raise _db_error(database_url, exc) from None
    try:
        if down:
            downgrade(engine, down)
        else:
            upgrade(engine, to)
        _echo({"revision": current_revision(engine), "url": engine.url.render_as_string()})
    except Exception as exc:  # alembic/SQLAlchemy errors name the revision or the database
        msg = str(getattr(exc, "orig", None) or exc).strip().splitlines() or [""]
        raise InputError(f"migrate: {type(exc).__name__}: {msg[0]}") from None
    finally:
        engine.dispose()


def register(app: typer.Typer) -> None:
    """Register ``registry`` on the CLI."""
    app.add_typer(registry_app)
