"""An analysis is kept in bytes that the recording and the code decide, not the processor."""
import json

from scripts.analysis_text import analysis_text


def test_sums_that_differ_in_their_last_bits_are_kept_as_the_same_text():
    # Two machines' means of the same committed sweep (AVX-512 and not), as first seen.
    here = {"perStepUs": 122.64892127501959, "blocks": [125.05236074681406, 120.3], "n": 7}
    there = {"perStepUs": 122.64892127501956, "blocks": [125.05236074681409, 120.3], "n": 7}
    assert analysis_text(here) == analysis_text(there)
    assert json.loads(analysis_text(here)) == {"perStepUs": 122.649,
                                               "blocks": [125.052, 120.3], "n": 7}


def test_only_floats_are_rounded_and_tuples_become_lists():
    kept = json.loads(analysis_text({"words": "1.23456789", "count": 123456789, "flag": True,
                                     "none": None, "pair": (1e-05, 2.0000001e9)}))
    assert kept == {"words": "1.23456789", "count": 123456789, "flag": True, "none": None,
                    "pair": [1e-05, 2e9]}
