"""Tasks: the task model, dataset builders, task files and splits.

Import from the submodules: ``evoharness.tasks.models`` (Task, Constraint),
``evoharness.tasks.builders`` (build_tasks), ``evoharness.tasks.io`` (load_tasks,
write_jsonl), ``evoharness.tasks.splits`` (prepare_splits, verify_splits).
"""
