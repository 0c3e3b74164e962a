"""An analysis as the text it is kept in: JSON whose numbers do not depend on the CPU
(NumPy's SIMD sums differ in their last bits between machines; MAINTAINING.md).
"""
import json

SIGNIFICANT = 6


def rounded(value):
    """`value` with every float, however nested, kept to SIGNIFICANT digits."""
    if isinstance(value, float):
        return float(f"{value:.{SIGNIFICANT}g}")
    if isinstance(value, dict):
        return {key: rounded(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [rounded(item) for item in value]
    return value


def analysis_text(analysis):
    """The analysis file's text; an interval of NaN is a bug to stop at, never a value."""
    return json.dumps(rounded(analysis), indent=1, sort_keys=True, allow_nan=False) + "\n"
