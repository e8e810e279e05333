"""The agent of a harness's Tools (issue 32): a bounded ReAct-style loop (``loop``) that calls
the harness's ``search`` (``search``: the provider port and the embedded offline knowledge
base) and ``query_knowledge`` tools, and answers a prompt-reference program (``program``)
that the runtime renders instead of the prompt. Backends: the embedded rule-based planner
(``planner``) and an LLM with tool calling (``services.proposer.backends.agent_chat``). This
package does no I/O: providers and backends are given.
"""
