"""The daemon runtime: the task group, source supervision, lifecycle, reload, state file, system facts."""
