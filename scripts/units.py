"""How a byte count (8 B, 2 KiB, 32 MiB) and a time (100 µs, 1 ms) are written for a reader,
by figures and analyses."""


def format_bytes(nbytes, _tick_position=None):
    """8 B, 2 KiB, 32 MiB: binary units, as the sizes are powers of two."""
    for unit, scale in (("MiB", 2**20), ("KiB", 2**10)):
        if nbytes >= scale:
            return f"{plain(nbytes / scale)} {unit}"
    return f"{plain(nbytes)} B"


def format_microseconds(value, _tick_position=None):
    """100 µs, 1 ms, 10 s: unit labels keep a log axis short."""
    for unit, scale in (("s", 1e6), ("ms", 1e3)):
        if value >= scale:
            return f"{value / scale:g} {unit}"
    return f"{value:g} µs"


def plain(number):
    """Three significant digits, never in exponent form: 1,000 rather than 1e+03."""
    text = f"{number:.3g}"
    return f"{number:,.0f}" if "e" in text else text
