"""An adversarial proposer for the workflow tests: before the rule-based proposer's patches it
returns malformed and out-of-contract answers of every kind the proposal checks must stop."""

from __future__ import annotations

from typing import Any

from evoharness.harness.schema import Harness
from evoharness.trace import rule_proposer
from evoharness.trace.models import Attribution, FailureCluster
from workflows.backends import Proposer

#: reason the checks must give → the junk answer
JUNK: dict[str, Any] = {
    "schema": "{this is not json",
    "schema-generator": {
        "responsibility": "generator",
        "ops": [{"op": "replace", "path": "/generator", "value": "sdxl"}],
    },
    "contract": {
        "responsibility": "tools",
        "ops": [{"op": "replace", "path": "/policy/template", "value": "masterpiece, {prompt}"}],
    },
    "harness_schema": {
        "responsibility": "policy",
        "ops": [{"op": "add", "path": "/policy/generator", "value": "another-model"}],
    },
    "apply": {"responsibility": "tools", "ops": [{"op": "remove", "path": "/tools/tools/42"}]},
    "no_op": {
        "responsibility": "memory",
        "ops": [{"op": "replace", "path": "/memory/top_k", "value": 5}],
    },
}


def _propose(cluster: FailureCluster, attr: Attribution, harness: Harness, n: int) -> list[Any]:
    return [*JUNK.values(), *rule_proposer.propose(cluster, attr, harness, n)]


def hostile_proposer() -> Proposer:
    """Rule localizer; proposer = every ``JUNK`` answer, then the rule proposer's patches."""
    return Proposer(localize=rule_proposer.localize, propose=_propose)
