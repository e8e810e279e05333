"""Round ports over the real embedded world (for unit tests of TRACE decisions): the harness
runtime with ``SimGenerator`` and ``SimInspector``, each final image inspected against the
task's constraints, generations memoised per (program) so a round re-reads identical
programs, as the content-addressed cache does in the workflows."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from evoharness.harness.io import harness_id
from evoharness.harness.schema import Harness
from evoharness.ports import ArtifactStore, store_fetch
from evoharness.program import ImageRef, Program, execution_key
from evoharness.runtime.runtime import Compiled, HarnessRuntime
from evoharness.runtime.tool_backends import ToolBackends
from evoharness.sim import SimGenerator, SimInspector
from evoharness.sim.profiles import DEFAULT_PROFILE, load_profile
from evoharness.sim.reference_library import EMBEDDED, open_library
from evoharness.tasks.models import Task
from evoharness.trace import rule_proposer
from evoharness.trace.models import Execution
from evoharness.trace.round import RoundPorts


class _MemoGenerator:
    def __init__(self, gen: SimGenerator) -> None:
        self.gen = gen
        self.generator_id = gen.generator_id
        self.capabilities = getattr(gen, "capabilities", None)
        self.cache: dict[str, Any] = {}
        self.calls = 0
        self.lock = threading.Lock()

    def generate(self, program: Program) -> Any:
        key = program.canonical()
        with self.lock:
            hit = self.cache.get(key)
        if hit is not None:
            return hit
        img = self.gen.generate(program)
        with self.lock:
            self.cache[key] = img
            self.calls += 1
        return img


class SimWorld:
    """``RoundPorts`` over the real runtime, simulator and pixel inspector."""

    def __init__(
        self,
        propose: Callable[..., list[Any]] | None = None,
        *,
        library_store: ArtifactStore | None = None,
        **overrides: Any,
    ) -> None:
        """``overrides``: ``SimParams`` fields changed from the default profile's.
        ``library_store``: a store the embedded reference library is built into and read
        from (the agent's ``image_search``; the generator reads references there)."""
        params = load_profile(DEFAULT_PROFILE)
        if overrides:
            params = params.model_validate({**params.model_dump(), **overrides})
        self.tools = ToolBackends()
        fetch = None
        if library_store is not None:
            self.tools = ToolBackends(reference_library=open_library(library_store, EMBEDDED))
            fetch = store_fetch(library_store)
        self.gen = _MemoGenerator(SimGenerator(params=params, fetch=fetch))
        self.insp = SimInspector()
        self._propose = propose or rule_proposer.propose

    def _runtime(self, h: Harness) -> HarnessRuntime:
        return HarnessRuntime(h, self.gen, self.insp, tools=self.tools)

    def compile_program(self, h: Harness, t: Task, seed: int) -> Compiled:
        return self._runtime(h).compile_task(t, seed)

    def execute(self, h: Harness, t: Task, seed: int) -> Execution:
        res = self._runtime(h).run_task(t, seed)
        ev = self.insp.verify(res.image.png, t.constraints, t.prompt)
        secs = sum(im.seconds for im in res.images)
        key = execution_key(res.program, self.gen.generator_id, res.program.seed)
        return Execution(
            task_id=t.task_id,
            seed=seed,
            harness_id=harness_id(h),
            execution_key=key,
            image=ImageRef(key=f"executions/{key}.png"),
            program=res.program,
            programs=list(res.programs),
            evidence=list(ev),
            trace=res.trace,
            generator_seconds=secs,
            generator_calls=len(res.images),
            nominal_generator_seconds=secs,
        )

    def ports(self) -> RoundPorts:
        return RoundPorts(
            execute=self.execute,
            compile_program=self.compile_program,
            localize=rule_proposer.localize,
            propose=self._propose,
        )
