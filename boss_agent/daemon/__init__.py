"""The daemon runtime: the task group, lifecycle, reload, state file, system facts, slots."""
