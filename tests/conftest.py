"""Test-wide set-up.

JAX fixes its backend and the number of logical CPU devices the first time anything asks
for a device, so this has to happen before any test module touches JAX. Eight devices let
one interpreter build meshes of 2, 4 and 8 from ``jax.devices()[:p]``; anything that needs
a different device count runs the lesson in a subprocess instead.
"""
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

os.environ["JAX_PLATFORMS"] = "cpu"
os.environ["JAX_NUM_CPU_DEVICES"] = "8"
