"""Exercise: write the ring all-gather from the ring reduce-scatter.

`ring_all_gather` below is lesson_code/ring_collectives.py's reduce-scatter turned around:
the same ring, the same p - 1 steps of `pass_right`, but each device COPIES the chunk it
receives into place (there is nothing to add) and forwards it on the next step. Fill in
the TODO lines, then check it:

    python -m lesson_code.ring_exercises               # your scaffold: one line per problem
    python -m lesson_code.ring_exercises --reference   # the site's own solution: passes

The check (lesson_code/ring_checks.py) runs your function on every device and compares
each device's result with the whole vector, then reads the lowered program: p - 1
`collective_permute`s and no all_gather, so `jax.lax.all_gather` does not count as an answer.
"""
import argparse
import sys

import jax
import jax.numpy as jnp

from lesson_code.ring_checks import check_ring_all_gather, collective_counts  # noqa: F401
from lesson_code.ring_collectives import AXIS, pass_right


def todo(what, *needs):
    """A hole in the scaffold. `needs`: the names the missing code works with."""
    raise NotImplementedError(f"TODO: {what}")


# --8<-- [start:ring_all_gather_scaffold]
def ring_all_gather(chunk):
    """Per device: chunk f32[F/p] (chunk r) -> f32[F], chunks in order."""
    p = jax.lax.axis_size(AXIS)
    r = jax.lax.axis_index(AXIS)
    gathered = todo("f32[p, F/p] zeros with this device's chunk in row r",
                    jnp.zeros, chunk, r)
    passing = chunk
    for s in range(p - 1):
        passing = todo("send `passing` right, keep what arrives",
                       pass_right, passing)
        gathered = todo("store `passing` in its chunk's row of `gathered`",
                        gathered, passing, r, s)
    return gathered.reshape(-1)  # f32[p, F/p] -> f32[F]
# --8<-- [end:ring_all_gather_scaffold]


def failures(implementation):
    """One line per problem with `implementation`; empty when it passes."""
    try:
        check_ring_all_gather(implementation)
    except NotImplementedError as error:
        return [f"ring_all_gather: unfinished: {error}"]
    except AssertionError as error:
        return [f"ring_all_gather: wrong: {error}"]
    except Exception as error:  # noqa: BLE001  a bug in the student's code: one line
        first = str(error).strip().splitlines()[0] if str(error).strip() else ""
        return [f"ring_all_gather: fails with {type(error).__name__}: {first}"]
    return []


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reference", action="store_true",
                        help="check lesson_code.ring_collectives' own ring_all_gather")
    parser.add_argument("--devices", type=int, default=4, help="ring size p (default 4)")
    args = parser.parse_args(argv)
    if args.devices < 2:
        parser.error(f"--devices {args.devices}: a ring needs at least 2 devices; "
                     f"try --devices 4")
    jax.config.update("jax_platforms", "cpu")
    jax.config.update("jax_num_cpu_devices", args.devices)
    if args.reference:
        from lesson_code.ring_collectives import ring_all_gather as implementation
    else:
        implementation = ring_all_gather
    try:
        problems = failures(implementation)
    except KeyboardInterrupt:  # Ctrl-C: one line and the shell's status, no traceback
        print("error: interrupted by SIGINT; nothing was checked", file=sys.stderr)
        return 130
    for line in problems:
        print(line)
    if problems:
        return 1
    print(f"ring_all_gather: passed on {args.devices} devices")
    return 0


if __name__ == "__main__":
    sys.exit(main())
