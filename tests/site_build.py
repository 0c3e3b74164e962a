"""Build the site (or a modified copy of the project) the way CI does, for the site tests."""
import subprocess
import sys

from conftest import clean_env

# A build must never import JAX: make `import jax` fail outright inside the build.
NO_JAX_BUILD = ("import sys; sys.modules['jax'] = None; sys.modules['jaxlib'] = None; "
                "from mkdocs.__main__ import cli; sys.argv[0] = 'mkdocs'; cli()")


def build(project, site_dir):
    """Run a strict build of `project` into `site_dir`; return the CompletedProcess."""
    return subprocess.run([sys.executable, "-c", NO_JAX_BUILD, "build", "--strict",
                           "--site-dir", str(site_dir)],
                          cwd=project, env=clean_env(), capture_output=True, text=True,
                          timeout=300)
