"""The lessons' code, and the only JAX in the repository (lesson_code/CONTRACT.md).

`python -m lesson_code.<module>` imports this package before the module's first line, so
the program shell (program.py) starts from here; named, not imported, so that importing
the package makes nothing depend on it.
"""
import sys

if sys.argv[:1] == ["-m"]:  # python -m lesson_code.<module>, before the module's own code
    import importlib

    importlib.import_module(f"{__name__}.program").guard_the_start()
