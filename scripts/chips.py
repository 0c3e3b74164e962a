"""The single-host TPU VM types a lesson can be recorded on, and their chips: data only.

The TPU job builds its gcloud commands from this table, and the docs build reads it to say
which VM fits a lesson without importing the job. One host sees every chip, so
`record.py --platform tpu` runs there unchanged; a lesson is recorded on a VM with exactly
its registered `devices`. v6e first: the default.
"""
CHIPS = {"v6e-1": 1, "v6e-4": 4, "v6e-8": 8,
         "v5litepod-1": 1, "v5litepod-4": 4, "v5litepod-8": 8}


def accelerators_for(devices):
    """The single-host VM types with exactly `devices` chips, the default first."""
    return [name for name, chips in CHIPS.items() if chips == devices]
