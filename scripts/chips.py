"""The TPU VM types a lesson can be recorded on, and their chips: data, no commands.

The TPU job (scripts/hardware/tpu.py) builds its gcloud commands from this table, and the
docs build reads it to say which VM fits a lesson, without importing the command builder.

Single-host TPU VMs: one process sees every chip, so `record.py --platform tpu` runs
unchanged there. A lesson is recorded on a VM with exactly its registered `devices`
(lessons.toml), so the recording is the run its page describes. Multi-host slices of 4
workers with 4 chips each run the lesson's rank module on every worker at once instead.
v6e first: the default.
"""
CHIPS = {"v6e-1": 1, "v6e-4": 4, "v6e-8": 8,
         "v5litepod-1": 1, "v5litepod-4": 4, "v5litepod-8": 8}
WORKERS = {"v5litepod-16": 4, "v6e-16": 4}  # hosts of a multi-host slice; others have 1
CHIPS_PER_WORKER = 4


def accelerators_for(devices):
    """The single-host VM types with exactly `devices` chips, the default first."""
    return [name for name, chips in CHIPS.items() if chips == devices]
