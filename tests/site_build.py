"""Build the site (or a modified copy of the project) the way CI does, for the site tests."""
import subprocess
import sys

from conftest import clean_env

# A build must never import JAX: make `import jax` fail outright inside the build.
NO_JAX_BUILD = ("import sys; sys.modules['jax'] = None; sys.modules['jaxlib'] = None; "
                "from mkdocs.__main__ import cli; sys.argv[0] = 'mkdocs'; cli()")


def build(project, site_dir, environment=None):
    """Run a strict build of `project` into `site_dir`; return the CompletedProcess."""
    # CI's SITE_URL never leaks into a test build unless the test asks for one.
    env = {key: value for key, value in clean_env(**(environment or {})).items()
           if key != "SITE_URL" or "SITE_URL" in (environment or {})}
    return subprocess.run([sys.executable, "-c", NO_JAX_BUILD, "build", "--strict",
                           "--site-dir", str(site_dir)],
                          cwd=project, env=env, capture_output=True, text=True,
                          timeout=300)
