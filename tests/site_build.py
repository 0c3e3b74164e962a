"""Build the site (or a modified copy of the project) the way CI does, for the site tests."""
import os
import subprocess
import sys
from pathlib import Path

from conftest import clean_env, run

# A build must never import JAX: make `import jax` fail outright inside the build.
NO_JAX = "import sys; sys.modules['jax'] = None; sys.modules['jaxlib'] = None; "
NO_JAX_BUILD = NO_JAX + "from mkdocs.__main__ import cli; sys.argv[0] = 'mkdocs'; cli()"
# `make build-zensical`: Zensical runs no hook, so the font is cut after.
ZENSICAL_STEPS = (["-c", NO_JAX + "from zensical.main import cli; cli()", "build", "--clean"],
                  ["-m", "scripts.pages.math_font", "site"])


def build(project, site_dir, environment=None):
    """A strict build of `project` into `site_dir` (a CompletedProcess), from its docs/ with `-f`:
    nothing read hangs on the working folder; `project`'s own code builds it, as its .venv would."""
    # CI's SITE_URL never leaks into a test build unless the test asks for one.
    env = {key: value for key, value in clean_env(**(environment or {})).items()
           if key != "SITE_URL" or "SITE_URL" in (environment or {})}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(project), env.get("PYTHONPATH")]))
    return subprocess.run([sys.executable, "-c", NO_JAX_BUILD, "build", "--strict", "-f",
                           str(Path(project, "mkdocs.yml")), "--site-dir", str(site_dir)],
                          cwd=Path(project, "docs"), env=env, capture_output=True, text=True,
                          timeout=300)


def build_with_zensical(project):
    """`make build-zensical` in `project` (into its site/): the failed step's run, or the last."""
    for step in ZENSICAL_STEPS:
        done = run(*step, cwd=project)
        if done.returncode:
            break
    return done
