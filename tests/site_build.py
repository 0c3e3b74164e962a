"""Build the site (or a modified copy of the project) the way CI does, for the site tests."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# What the docs build reads; node_modules is linked, not copied.
BUILD_INPUTS = ("mkdocs.yml", "requirements.txt", "constraints.txt", "docs", "scripts",
                "lesson_code", "recordings", "figures")

# A build must never import JAX: make `import jax` fail outright inside the build.
NO_JAX_BUILD = ("import sys; sys.modules['jax'] = None; sys.modules['jaxlib'] = None; "
                "from mkdocs.__main__ import cli; sys.argv[0] = 'mkdocs'; cli()")


def copy_project(destination):
    destination = Path(destination)
    destination.mkdir(parents=True)
    for name in BUILD_INPUTS:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, destination / name,
                            ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(source, destination / name)
    (destination / "node_modules").symlink_to(ROOT / "node_modules")
    return destination


def build(project, site_dir, environment=None):
    """Run a strict build of `project` into `site_dir`; return the CompletedProcess."""
    # The published address (CI sets SITE_URL) never leaks into a test build: tests serve
    # the site at the root unless they ask for a sub-path themselves.
    inherited = {key: value for key, value in os.environ.items() if key != "SITE_URL"}
    env = {**inherited, "NO_MKDOCS_2_WARNING": "1", **(environment or {})}
    return subprocess.run([sys.executable, "-c", NO_JAX_BUILD, "build", "--strict",
                           "--site-dir", str(site_dir)],
                          cwd=project, env=env, capture_output=True, text=True, timeout=300)
