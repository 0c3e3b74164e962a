"""An analysis as the text it is kept in: JSON whose numbers do not depend on the CPU.

NumPy reduces with the widest SIMD the processor offers, so the same recorded samples
give sums that differ in their last bits from one machine to the next: a block mean of
122.64892127501959 µs on the machine that derived the committed sweep analysis was
122.64892127501956 on an AVX-512 one, and a re-derivation there no longer matched the
committed bytes. A statistic of noisy timings carries nothing in its seventeenth digit,
so every float is kept to SIGNIFICANT digits: the derived bytes are then the recording's
and the code's alone, whichever machine derived them (a value would have to lie within
a few units in its last place of a rounding boundary to come out otherwise). An exact
quantity with more digits than that, a byte count, is an analysis's to keep as an int.

A page's `{{ rec:… }}` value is formatted from the kept number, while the `words` an
analysis writes were formatted from the unrounded one; the two can differ only where
the page asks for six or more digits, which no page does.
"""
import json

SIGNIFICANT = 6


def rounded(value):
    """`value` with every float kept to SIGNIFICANT significant digits, nested through
    dicts and lists; ints, strings, booleans and None as they are."""
    if isinstance(value, float):
        return float(f"{value:.{SIGNIFICANT}g}")
    if isinstance(value, dict):
        return {key: rounded(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [rounded(item) for item in value]
    return value


def analysis_text(analysis):
    """The analysis file's text. allow_nan=False: an interval of NaN is a bug to stop at,
    never a page value."""
    return json.dumps(rounded(analysis), indent=1, sort_keys=True, allow_nan=False) + "\n"
