"""CLI verbs for scheduled evolution from production traffic (issue 34):
``evoharness schedule create|list|pause|unpause|trigger|delete`` over Temporal Schedules of
``TrafficEvolutionWorkflow`` (``workflows/traffic_evolution.py``, ``workflows/schedules.py``)."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Annotated

import typer

from evoharness_app.commands.evolve import (
    Address,
    Namespace,
    connect_temporal,
    run_temporal,
    temporal_address,
)
from evoharness_app.errors import InputError

schedule_app = typer.Typer(
    name="schedule",
    help="Scheduled evolution from a channel's sampled traffic (Temporal Schedules).",
    no_args_is_help=True,
)

ScheduleId = Annotated[str, typer.Argument(help="The schedule's id.", show_default=False)]
_EVERY = re.compile(r"^(\d+)([mhd])$")


def parse_every(text: str, option: str = "--every") -> timedelta:
    """``30m``, ``6h``, ``1d`` → a timedelta; ``BadParameter`` naming ``option`` otherwise."""
    m = _EVERY.match(text.strip())
    if not m:
        raise typer.BadParameter(
            f"{text!r}: give a number and m, h or d (e.g. 1d)", param_hint=option
        )
    n, unit = int(m.group(1)), m.group(2)
    return (
        timedelta(minutes=n)
        if unit == "m"
        else timedelta(hours=n)
        if unit == "h"
        else timedelta(days=n)
    )


def check_channel(channel: str, target: str) -> None:
    """``InputError`` unless the registry service at ``target`` knows ``channel`` (it was
    promoted to): each scheduled run resolves it first, so an unknown or misspelt channel
    would fail every run. The registry's ``NotFound`` names the channels there are."""
    import os

    from harness_registry.errors import InvalidArgument, NotFound, RegistryError
    from services.registry.client import RegistryClient

    client = RegistryClient(target, token=os.environ.get("EVOHARNESS_TOKEN", ""))
    try:
        client.resolve(channel, with_document=False)
    except (NotFound, InvalidArgument) as exc:
        raise InputError(f"--channel {channel}: registry {target}: {exc}") from None
    except RegistryError as exc:
        raise InputError(
            f"--channel {channel}: cannot check it at the registry {target} (--target, "
            f"$EVOHARNESS_REGISTRY_TARGET): {exc}"
        ) from None
    finally:
        client.close()


@schedule_app.command("create")
def create_cmd(
    channel: Annotated[str, typer.Option("--channel", help="The serving channel to evolve for.")],
    every: Annotated[str, typer.Option("--every", help="How often: 30m, 6h, 1d.")] = "1d",
    window_days: Annotated[
        int, typer.Option("--window-days", help="UTC days of traffic each run reads.", min=1)
    ] = 7,
    sizes: Annotated[
        str, typer.Option("--sizes", help="target,heldout,preservation task counts.")
    ] = "40,20,20",
    rounds: Annotated[int, typer.Option("--rounds", min=1)] = 2,
    budget_generator_calls: Annotated[
        int | None, typer.Option("--budget-generator-calls", min=1)
    ] = None,
    canary_weight: Annotated[
        float, typer.Option("--canary-weight", help="Share the canary serves.", min=0.001, max=1)
    ] = 0.1,
    canary_check: Annotated[
        bool,
        typer.Option(
            "--canary-check/--no-canary-check",
            help="Judge the canary on live sampled traffic after promoting it, rolling it back "
            "when it does worse.",
        ),
    ] = True,
    canary_deadline: Annotated[
        str,
        typer.Option(
            "--canary-deadline",
            help="How long the check waits for enough sampled requests (30m, 6h; shorter "
            "than --every), then ends inconclusive.",
        ),
    ] = "6h",
    canary_min_requests: Annotated[
        int, typer.Option("--canary-min-requests", help="Decided requests per arm.", min=1)
    ] = 30,
    schedule_id: Annotated[
        str, typer.Option("--id", help="Schedule id (default: traffic-evolution-CHANNEL).")
    ] = "",
    paused: Annotated[bool, typer.Option("--paused", help="Create it paused.")] = False,
    task_queue: Annotated[str, typer.Option("--task-queue")] = "evoharness",
    registry_target: Annotated[
        str,
        typer.Option(
            "--target",
            envvar="EVOHARNESS_REGISTRY_TARGET",
            help="host:port of the registry service the workers use (--channel must be "
            "one of its channels).",
        ),
    ] = "127.0.0.1:50054",
    address: Address = "",
    namespace: Namespace = "default",
) -> None:
    """Create a schedule that, every ``--every``, builds tasks from ``--channel``'s last
    ``--window-days`` of sampled traffic, evolves the harness the channel serves on them (with
    ``--rounds`` and a generator-call budget) and sets the result as the channel's canary only
    when the gate accepted a patch; then (unless ``--no-canary-check``) judges the canary on the
    live traffic sampled since its promotion and rolls it back when it does worse."""
    from pydantic import ValidationError

    from evoharness.tasks.splits import check_sizes
    from workflows import schedules
    from workflows.traffic_evolution import TrafficEvolutionInput

    evolution: dict[str, object] = {"max_rounds": rounds}
    if budget_generator_calls is not None:
        evolution["budget_generator_calls"] = budget_generator_calls
    period = parse_every(every)
    deadline = parse_every(canary_deadline, "--canary-deadline")
    if canary_check and deadline >= period:
        raise InputError(
            f"--canary-deadline {canary_deadline} must be shorter than --every {every}: the "
            "schedule skips a run while the previous one (and its check) goes on"
        )
    check = (
        {"deadline_s": deadline.total_seconds(), "min_requests": canary_min_requests}
        if canary_check
        else None
    )
    try:
        inp = TrafficEvolutionInput(
            channel=channel,
            window_days=window_days,
            sizes=list(check_sizes(sizes.split(","), "--sizes")),
            canary_weight=canary_weight,
            evolution=evolution,
            canary_check=check,
        )
    except (ValidationError, ValueError) as exc:
        raise InputError(f"schedule: {exc}") from None
    check_channel(channel, registry_target)
    sid = schedule_id or f"traffic-evolution-{channel}"
    addr = temporal_address(address)

    async def go() -> str:
        c = await connect_temporal(addr, namespace)
        return await schedules.create(
            c, sid, inp, every=period, task_queue=task_queue, paused=paused
        )

    run_temporal(go(), addr, f"schedule create {sid}")
    typer.echo(f"created schedule {sid}: every {every}, channel {channel}, on {task_queue}")


@schedule_app.command("list")
def list_cmd(address: Address = "", namespace: Namespace = "default") -> None:
    """List the schedules, paused or not, with their most recent start."""
    from workflows import schedules

    addr = temporal_address(address)

    async def go() -> list[schedules.ScheduleInfo]:
        c = await connect_temporal(addr, namespace)
        return [await schedules.describe(c, i) for i in await schedules.list_ids(c)]

    for s in run_temporal(go(), addr, "schedule list"):
        last = s.recent_workflow_ids[-1] if s.recent_workflow_ids else "never started"
        typer.echo(f"{s.schedule_id}\t{'paused' if s.paused else 'active'}\t{last}")


def _verb(name: str, what: str) -> None:
    def cmd(
        schedule_id: ScheduleId, address: Address = "", namespace: Namespace = "default"
    ) -> None:
        from workflows import schedules

        addr = temporal_address(address)

        async def go() -> None:
            c = await connect_temporal(addr, namespace)
            await getattr(schedules, name)(c, schedule_id)

        run_temporal(go(), addr, f"schedule {name} {schedule_id}")
        typer.echo(f"{schedule_id}: {what}")

    cmd.__doc__ = f"{what.capitalize()} (``workflows.schedules.{name}``)."
    schedule_app.command(name)(cmd)


for _name, _what in (
    ("pause", "paused"),
    ("unpause", "unpaused"),
    ("trigger", "one run started now"),
    ("delete", "deleted"),
):
    _verb(_name, _what)


def register(app: typer.Typer) -> None:
    """Add ``schedule`` to ``app``."""
    app.add_typer(schedule_app, name="schedule")
