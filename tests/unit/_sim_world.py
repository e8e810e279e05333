"""The embedded CPU world as ``RoundPorts`` for unit tests of the TRACE core on real runtime
traces: ``HarnessRuntime`` over ``SimGenerator`` and ``SimInspector``, the rule localizer
and proposer. Tasks are built from prompts with the rule extractor (their constraints are what
the prompt states). Cost is counted as one generator-second per generation (deterministic).

``generator(**overrides)`` builds a simulator on the default profile with some ``SimParams``
changed (a world where an effect is strong enough to test a concept exactly); ``execute``,
``compile_program`` and ``ports`` take it as ``gen`` (default: the default profile)."""

from __future__ import annotations

from evoharness.harness.io import harness_id, load_dir
from evoharness.harness.schema import Harness
from evoharness.program import execution_key
from evoharness.runtime.extract import RuleExtractor
from evoharness.runtime.runtime import HarnessRuntime
from evoharness.sim import SimGenerator, SimInspector
from evoharness.sim.profiles import DEFAULT_PROFILE, load_profile
from evoharness.tasks.models import Task
from evoharness.trace import rule_proposer
from evoharness.trace.models import Execution
from evoharness.trace.round import RoundPorts

GENERATOR = SimGenerator()
INSPECTOR = SimInspector()


def generator(**overrides: object) -> SimGenerator:
    """The default profile's simulator with the given ``SimParams`` fields changed."""
    params = load_profile(DEFAULT_PROFILE)
    return SimGenerator(params=params.model_validate({**params.model_dump(), **overrides}))


def tasks(prefix: str, prompts: list[str]) -> list[Task]:
    ex = RuleExtractor()
    out = []
    for i, p in enumerate(prompts):
        cons = [
            c.model_copy(update={"constraint_id": f"c{j}"}) for j, c in enumerate(ex.extract(p))
        ]
        out.append(Task(task_id=f"{prefix}{i}", prompt=p, task_family="unit", constraints=cons))
    return out


def baseline(**middleware_stages: dict) -> Harness:
    """``harnesses/baseline`` with the given middleware stages appended (kind → settings)."""
    doc = load_dir("harnesses/baseline").model_dump(mode="json")
    for kind, kw in middleware_stages.items():
        doc["middleware"]["stages"].append({"kind": kind, **kw})
    return Harness.model_validate(doc)


def execute(h: Harness, t: Task, seed: int, gen: SimGenerator = GENERATOR) -> Execution:
    res = HarnessRuntime(h, gen, INSPECTOR).run_task(t, seed)
    evidence = INSPECTOR.verify(res.image.png, t.constraints, t.prompt)
    # one generator-second per generation: the simulator reports wall time, which would make
    # Δcost (and so decisions) differ between identical runs
    secs = float(len(res.images))
    return Execution(
        task_id=t.task_id,
        seed=seed,
        harness_id=harness_id(h),
        execution_key=execution_key(res.program, gen.generator_id, res.program.seed),
        program=res.program,
        programs=list(res.programs),
        evidence=list(evidence),
        trace=list(res.trace),
        generator_seconds=secs,
        generator_calls=len(res.images),
        nominal_generator_seconds=secs,
    )


def compile_program(h: Harness, t: Task, seed: int, gen: SimGenerator = GENERATOR):
    return HarnessRuntime(h, gen, INSPECTOR).compile_task(t, seed).program


def ports(gen: SimGenerator = GENERATOR) -> RoundPorts:
    return RoundPorts(
        execute=lambda h, t, seed: execute(h, t, seed, gen),
        compile_program=lambda h, t, seed: compile_program(h, t, seed, gen),
        localize=rule_proposer.localize,
        propose=rule_proposer.propose,
    )
