"""The lessons' code, and the only JAX in the repository (lesson_code/CONTRACT.md).

Started as a program, `python -m lesson_code.<module>`, this package is imported before
the module's first line, so the program shell (program.py) guards the start from here:
a signal during `import jax`, or a JAX_NUM_CPU_DEVICES that is not a number, is one line.
The shell is named, not imported, so that importing the package makes nothing depend on it.
"""
import sys

if sys.argv[:1] == ["-m"]:  # python -m lesson_code.<module>, before the module's own code
    import importlib

    importlib.import_module(f"{__name__}.program").guard_the_start()
