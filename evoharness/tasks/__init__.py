"""Tasks: the task model, dataset builders, task files and splits.

Import from the submodules: ``evoharness.tasks.models`` (Task, Constraint),
``evoharness.tasks.builders`` (build_tasks), ``evoharness.tasks.io`` (load_tasks,
write_jsonl), ``evoharness.tasks.splits`` (the split names and the dealing),
``evoharness.tasks.split_prepare`` (prepare_splits, build_run_splits),
``evoharness.tasks.split_manifest`` (verify_splits, check_split_hashes).
"""
