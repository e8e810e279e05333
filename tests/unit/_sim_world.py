"""The embedded CPU world as ``RoundPorts`` for unit tests of the TRACE core on real runtime
traces: ``HarnessRuntime`` over ``SimGenerator`` and ``SimInspector``, the rule localizer
and proposer. Tasks are built from prompts with the rule extractor (their constraints are what
the prompt states). Cost is counted as one generator-second per generation (deterministic)."""

from __future__ import annotations

from evoharness.harness.io import harness_id, load_dir
from evoharness.harness.schema import Harness
from evoharness.program import execution_key
from evoharness.runtime.extract import RuleExtractor
from evoharness.runtime.runtime import HarnessRuntime
from evoharness.sim import SimGenerator, SimInspector
from evoharness.tasks.models import Task
from evoharness.trace import rule_proposer
from evoharness.trace.models import Execution
from evoharness.trace.round import RoundPorts

GENERATOR = SimGenerator()
INSPECTOR = SimInspector()


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


def execute(h: Harness, t: Task, seed: int) -> Execution:
    res = HarnessRuntime(h, GENERATOR, INSPECTOR).run_task(t, seed)
    evidence = INSPECTOR.verify(res.image.png, t.constraints, t.prompt)
    # one generator-second per generation: the simulator reports wall time, which would make
    # Δcost (and so decisions) differ between identical runs
    secs = float(len(res.images))
    return Execution(
        task_id=t.task_id,
        seed=seed,
        harness_id=harness_id(h),
        execution_key=execution_key(res.program, GENERATOR.generator_id, res.program.seed),
        program=res.program,
        programs=list(res.programs),
        evidence=list(evidence),
        trace=list(res.trace),
        generator_seconds=secs,
        generator_calls=len(res.images),
        nominal_generator_seconds=secs,
    )


def compile_program(h: Harness, t: Task, seed: int):
    return HarnessRuntime(h, GENERATOR, INSPECTOR).compile_task(t, seed).program


def ports() -> RoundPorts:
    return RoundPorts(
        execute=execute,
        compile_program=compile_program,
        localize=rule_proposer.localize,
        propose=rule_proposer.propose,
    )
