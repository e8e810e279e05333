"""CLI verbs for production traffic (issue 34): ``tasks from-traffic`` builds a label-free
task set from a channel's sampled Render requests; ``traffic reference`` records the profile of
the tasks a channel's harness was evolved on, which the runtime's drift gauge compares recent
traffic with; ``traffic drift`` prints that comparison for a window of stored traffic.

Bad input raises ``evoharness_app.cli.InputError`` → exit 1 (naming the file, key and line).
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Annotated, Any

import typer

from evoharness.tasks.io import (
    TaskFileError,
    atomic_write_bytes,
    load_tasks,
    refuse_missing_parent,
    write_jsonl,
)
from evoharness.tasks.labelfree import LabelFreeError
from evoharness.traffic.drift import TrafficProfile, drift, failure_rates
from evoharness.traffic.records import TrafficReadError, read_window, reference_key
from evoharness.traffic.tasks import tasks_from_records
from evoharness_app.errors import InputError

tasks_app = typer.Typer(help="Task sets from other sources.", no_args_is_help=True)
traffic_app = typer.Typer(
    help="Sampled production traffic: drift references and reports.", no_args_is_help=True
)

Channel = Annotated[str, typer.Option("--channel", help="The serving channel.")]
StoreOpt = Annotated[
    Path | None,
    typer.Option(
        "--store", help="Artifact store as a local folder (default: the stack's S3 bucket)."
    ),
]
Prefix = Annotated[
    str, typer.Option("--prefix", help="Key prefix of sampled traffic (runtime.traffic.prefix).")
]


def _day(text: str, option: str) -> dt.date:
    try:
        return dt.date.fromisoformat(text)
    except ValueError:
        raise typer.BadParameter(
            f"{text!r} is not a date (YYYY-MM-DD)", param_hint=option
        ) from None


def _store(folder: Path | None) -> Any:
    from evoharness_app.stores import open_store

    try:
        return open_store(folder)
    except FileNotFoundError as exc:
        raise InputError(str(exc)) from None


def from_traffic(
    channel: Channel,
    since: Annotated[str, typer.Option("--since", help="First UTC day (YYYY-MM-DD).")],
    output: Annotated[Path, typer.Option("--output", help="Task file to write (JSON Lines).")],
    until: Annotated[
        str | None, typer.Option("--until", help="Last UTC day (default: today).")
    ] = None,
    store: StoreOpt = None,
    prefix: Prefix = "traffic",
    extractor: Annotated[
        str, typer.Option("--extractor", help="The fixed extractor that reads constraints.")
    ] = "rules-v1",
) -> None:
    """Build a label-free task set from ``--channel``'s sampled requests of ``--since`` ..
    ``--until`` (UTC days, inclusive): one task per distinct prompt, constraints read by the
    fixed extractor, and ``<output>.manifest.json`` naming the source, the dates, the counts and
    the task profile. Nothing is written when the traffic cannot be read or holds no task."""
    first = _day(since, "--since")
    last = _day(until, "--until") if until else dt.datetime.now(dt.UTC).date()
    if output.is_dir():
        raise InputError(f"--output {output}: is a directory, expected a file path")
    try:
        refuse_missing_parent(output, "--output")
        records, batches = read_window(_store(store), prefix, channel, first, last)
        tasks, manifest = tasks_from_records(
            records, channel=channel, since=first, until=last, batches=batches, extractor=extractor
        )
    except (TrafficReadError, TaskFileError, LabelFreeError, ValueError) as exc:
        raise InputError(str(exc)) from None
    if not tasks:
        raise InputError(
            f"channel {channel!r}, {first}..{last}: {len(records)} sampled requests in "
            f"{batches} batches, no task with a checkable constraint; nothing written"
        )
    write_jsonl(tasks, output)
    mpath = output.with_name(output.name + ".manifest.json")
    atomic_write_bytes(mpath, manifest.model_dump_json(indent=2).encode("utf-8"))
    fams = ", ".join(f"{k} {v}" for k, v in manifest.families.items())
    typer.echo(
        f"{len(records)} sampled requests ({batches} batches), {manifest.unique_prompts} "
        f"distinct prompts -> {len(tasks)} tasks in {output} "
        f"({len(manifest.dropped_nothing_checkable)} with nothing checkable dropped)"
    )
    typer.echo(f"families: {fams}")
    typer.echo(f"manifest: {mpath}")


def reference(
    channel: Channel,
    tasks: Annotated[
        Path, typer.Option("--tasks", help="The tasks the channel's harness was evolved on.")
    ],
    store: StoreOpt = None,
    prefix: Prefix = "traffic",
) -> None:
    """Record the profile of ``--tasks`` (constraint kinds and object classes) as
    ``--channel``'s drift reference in the artifact store; the runtime reads it within
    ``runtime.traffic.reference_ttl_seconds``."""
    try:
        loaded = load_tasks(tasks)
    except (TaskFileError, OSError) as exc:
        raise InputError(str(exc)) from None
    if not loaded:
        raise InputError(f"{tasks}: no tasks; nothing recorded")
    profile = TrafficProfile.of((t.constraints for t in loaded), source=str(tasks))
    key = reference_key(prefix, channel)
    _store(store).put(key, profile.model_dump_json(indent=2).encode("utf-8"), "application/json")
    typer.echo(f"reference for {channel}: {profile.n} tasks -> {key}")


def drift_cmd(
    channel: Channel,
    since: Annotated[str, typer.Option("--since", help="First UTC day (YYYY-MM-DD).")],
    until: Annotated[
        str | None, typer.Option("--until", help="Last UTC day (default: today).")
    ] = None,
    store: StoreOpt = None,
    prefix: Prefix = "traffic",
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Compare ``--channel``'s stored traffic of ``--since`` .. ``--until`` with its drift
    reference: Jensen–Shannon distance per distribution and failure rate per constraint type
    (what the runtime's gauges show for its recent window)."""
    first = _day(since, "--since")
    last = _day(until, "--until") if until else dt.datetime.now(dt.UTC).date()
    st = _store(store)
    key = reference_key(prefix, channel)
    try:
        records, _ = read_window(st, prefix, channel, first, last)
        ref = TrafficProfile.model_validate_json(st.get(key)) if st.exists(key) else None
    except (TrafficReadError, ValueError) as exc:
        raise InputError(str(exc)) from None
    distances = drift(ref, TrafficProfile.of_records(records)) if ref is not None else {}
    rates = failure_rates(records)
    out = {
        "channel": channel,
        "records": len(records),
        "reference": key if ref is not None else None,
        "drift": distances,
        "failure_rate": rates,
    }
    if as_json:
        typer.echo(json.dumps(out, indent=2))
        return
    typer.echo(f"{channel}: {len(records)} sampled requests, {first}..{last}")
    if ref is None:
        typer.echo(f"no drift reference at {key} (record one: evoharness traffic reference)")
    for name, d in distances.items():
        typer.echo(f"drift ({name}): {d:.3f}")
    for feat, r in sorted(rates.items()):
        typer.echo(f"failure rate {feat}: {r:.1%}")


def canary_check(
    channel: Channel,
    since: Annotated[
        str | None,
        typer.Option(
            "--since",
            help="First UTC day of traffic to compare (YYYY-MM-DD; default: the time the "
            "channel moved to its current version, i.e. the canary's promotion).",
        ),
    ] = None,
    rollback: Annotated[
        bool, typer.Option("--rollback", help="Remove a worse canary from the channel.")
    ] = False,
    alpha: Annotated[float, typer.Option("--alpha", min=1e-6, max=0.5)] = 0.05,
    epsilon: Annotated[
        float, typer.Option("--epsilon", help="Smallest pass-rate gap that counts.", min=0)
    ] = 0.0,
    min_requests: Annotated[int, typer.Option("--min-requests", min=1)] = 30,
    target: Annotated[
        str,
        typer.Option(
            "--target",
            envvar="EVOHARNESS_REGISTRY_TARGET",
            help="host:port of the registry service.",
        ),
    ] = "127.0.0.1:50054",
    store: StoreOpt = None,
    prefix: Prefix = "traffic",
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Compare the channel's canary with its stable registration on the sampled traffic since
    the canary's promotion (or ``--since``) and, with ``--rollback``, take a worse canary off
    the channel — a compare-and-set on the channel version it read, so a move made meanwhile
    is never overwritten (``services.registry.canary.check_canary``, the same look the
    post-promotion canary workflow takes). Exit 0 whatever the verdict; 1 on bad input or a
    channel without a canary."""
    import os

    from harness_registry import errors as rerr
    from services.registry.canary import CanaryLookSpec, NoCanary, check_canary
    from services.registry.client import RegistryClient

    first = dt.datetime.combine(_day(since, "--since"), dt.time(), tzinfo=dt.UTC) if since else None
    st = _store(store)
    client = RegistryClient(target, token=os.environ.get("EVOHARNESS_TOKEN", ""))
    try:
        spec = CanaryLookSpec(
            since=first,
            prefix=prefix,
            alpha=alpha,
            epsilon=epsilon,
            min_requests=min_requests,
            rollback=rollback,
            actor="traffic canary-check",
        )
        look = check_canary(client, st, channel, spec)
    except (NoCanary, TrafficReadError, ValueError) as exc:
        raise InputError(str(exc)) from None
    except rerr.RegistryError as exc:
        raise InputError(f"registry {target}: {type(exc).__name__}: {exc}") from None
    finally:
        client.close()
    if as_json:
        typer.echo(json.dumps(look.as_dict(), indent=2))
        return
    cmp = look.comparison
    if cmp is not None:
        typer.echo(
            f"{channel}: canary {cmp.canary_id} {cmp.pass_rate_canary:.1%} (n={cmp.n_canary}) "
            f"vs stable {cmp.stable_id} {cmp.pass_rate_stable:.1%} (n={cmp.n_stable}), "
            f"p={cmp.p_value:.3g}, since {look.since.isoformat()}"
        )
    verdict = {
        "waiting": "not enough sampled requests yet",
        "kept": "canary not worse",
        "worse": "canary worse",
        "rolled_back": "canary worse; rolled back (canary removed)",
        "lost_race": "canary worse; the channel moved meanwhile: not rolled back",
        "channel_moved": "the channel moved: nothing judged",
    }[look.outcome]
    typer.echo(verdict)


def register(app: typer.Typer) -> None:
    """Add ``tasks from-traffic`` and ``traffic reference|drift|canary-check`` to ``app``."""
    tasks_app.command("from-traffic")(from_traffic)
    traffic_app.command("reference")(reference)
    traffic_app.command("drift")(drift_cmd)
    traffic_app.command("canary-check")(canary_check)
    app.add_typer(tasks_app, name="tasks")
    app.add_typer(traffic_app, name="traffic")
