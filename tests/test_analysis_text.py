"""An analysis is kept in bytes that the recording and the code decide, not the processor."""
import json

from scripts.analysis_text import analysis_text


def test_floats_are_kept_to_the_digits_every_processor_agrees_on_and_nothing_else_changes():
    # Two machines' means of the same committed sweep (AVX-512 and not), as first seen.
    here = {"perStepUs": 122.64892127501959, "blocks": [125.05236074681406, 120.3],
            "n": 123456789, "words": "1.23456789", "flag": True, "none": None,
            "pair": (1e-05, 2.0000001e9)}
    there = {**here, "perStepUs": 122.64892127501956, "blocks": [125.05236074681409, 120.3]}
    assert analysis_text(here) == analysis_text(there)
    assert json.loads(analysis_text(here)) == {
        "perStepUs": 122.649, "blocks": [125.052, 120.3], "n": 123456789,
        "words": "1.23456789", "flag": True, "none": None, "pair": [1e-05, 2e9]}
