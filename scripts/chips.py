"""The single-host TPU VM types a lesson can be recorded on (one with exactly its
`devices` chips), for the job and the docs build alike; v6e first: the default.
"""
CHIPS = {"v6e-1": 1, "v6e-4": 4, "v6e-8": 8,
         "v5litepod-1": 1, "v5litepod-4": 4, "v5litepod-8": 8}


def accelerators_for(devices):
    """The single-host VM types with exactly `devices` chips, the default first."""
    return [name for name, chips in CHIPS.items() if chips == devices]
