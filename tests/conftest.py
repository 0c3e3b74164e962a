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


import pytest  # noqa: E402


@pytest.fixture(scope="session")
def built_site(tmp_path_factory):
    """The site, built strictly from the working tree with JAX made unimportable."""
    from site_build import build

    site = tmp_path_factory.mktemp("site")
    run = build(ROOT, site)
    assert run.returncode == 0, run.stderr[-3000:]
    return site
