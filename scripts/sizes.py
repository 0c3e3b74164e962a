"""Message sizes: which the sweep asks for and what each moves at p ranks.

The one module of scripts/ that lesson_code/ imports (the sweep module sizes its arrays
with it), so it is in the sweep recording's import closure: a change here asks for `make
bench`. How a size is written for a reader is scripts/units.py, which the lesson does not
import; the analysis of what was measured is scripts/sweep/analysis.py.
"""
XLA_COLLECTIVES = ("all_reduce", "reduce_scatter", "all_gather", "reduce_scatter_all_gather")
# lesson_code/ring_collectives.py: the same results from p - 1 ppermute steps per phase.
RING_COLLECTIVES = ("ring_reduce_scatter", "ring_all_reduce")
COLLECTIVES = XLA_COLLECTIVES + RING_COLLECTIVES

# 8 B .. 32 MiB, a factor 4 apart: the small end is where the lesson's 8-value gradient
# lives; the large end reaches the size of a large last-level cache (32 MiB), so the
# largest rows show whether the copies spill to DRAM (the fits stop below the cache).
SIZES = tuple(8 * 4**k for k in range(12))


def element_count(nbytes, ranks, itemsize=4):
    """Elements of a float32 array of at least `nbytes`, rounded up to a multiple of `ranks`.

    Reduce-scatter and the sharded all-gather input split the array evenly over the ranks,
    so 8 B (two floats) becomes 4 floats at p=4; rows report the bytes actually moved.
    """
    n = -(-nbytes // itemsize)
    return -(-n // ranks) * ranks


def sizes_for(requested_sizes, ranks):
    """[(requested, bytes moved)] with each moved size once: at p = 8 both 8 B and 32 B
    round up to eight floats, and one size measured twice would only repeat a point."""
    seen, sizes = set(), []
    for requested in requested_sizes:
        nbytes = 4 * element_count(requested, ranks)
        if nbytes not in seen:
            seen.add(nbytes)
            sizes.append((requested, nbytes))
    return sizes
