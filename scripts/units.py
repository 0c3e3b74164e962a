"""How a byte count is written for a reader: 8 B, 2 KiB, 32 MiB, by figures and analyses."""


def format_bytes(nbytes, _tick_position=None):
    """8 B, 2 KiB, 32 MiB: binary units, as the sizes are powers of two."""
    for unit, scale in (("MiB", 2**20), ("KiB", 2**10)):
        if nbytes >= scale:
            return f"{plain(nbytes / scale)} {unit}"
    return f"{plain(nbytes)} B"


def plain(number):
    """Three significant digits, never in exponent form: 1,000 rather than 1e+03."""
    text = f"{number:.3g}"
    return f"{number:,.0f}" if "e" in text else text
