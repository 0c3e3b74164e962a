"""The benchmarks' own tests (benchmarks/test_*.py): how each benchmark reads what it
measured, never a measurement. `make test` and plain `pytest` run them with the suite,
borrowing its helpers and its one site build (tests/conftest.py)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from conftest import built_site, signals_as_they_were  # noqa: E402,F401
