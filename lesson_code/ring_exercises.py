"""Exercise: write the ring all-gather from the ring reduce-scatter.

`ring_all_gather` below is lesson_code/ring_collectives.py's reduce-scatter turned around:
the same ring, the same p - 1 steps of `pass_right`, but each device COPIES the chunk it
receives into place (there is nothing to add) and forwards it on the next step. Fill in
the TODO lines, then check it:

    python -m lesson_code.ring_exercises               # your scaffold: one line
    python -m lesson_code.ring_exercises --devices 8   # the same, on a ring of 8
    python -m lesson_code.ring_exercises --reference   # the site's own solution: passes

That is the course's checker (scripts/exercises.py) on this one exercise. The check
(lesson_code/ring_checks.py) runs your function on every device and compares each
device's result with the whole vector, then reads the lowered program: p - 1
`collective_permute`s and no all_gather, so `jax.lax.all_gather` does not count as an answer.
"""
if __name__ == "__main__":  # before JAX loads: the checker is the course's, not this file's
    from lesson_code.exercise import run_checker
    run_checker("--lesson", "distributed-03", "--exercise", "ring_all_gather")

import jax
import jax.numpy as jnp

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
