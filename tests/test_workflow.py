"""Lint the GitHub Actions workflow: structure, pinned actions, the same test command.

actionlint is not installable here (its PyPI wrapper builds from Go sources), so this
checks the rules that matter for this workflow with the YAML parser mkdocs already needs.
"""
import re

import yaml

from conftest import ROOT

WORKFLOW = ROOT / ".github" / "workflows" / "site.yml"
KNOWN_CONTEXTS = {"github", "steps", "env", "needs", "secrets", "vars", "runner", "job",
                  "matrix", "inputs"}


def load():
    # YAML 1.1 reads the key `on` as True; GitHub reads it as the string "on".
    return {("on" if key is True else key): value
            for key, value in yaml.safe_load(WORKFLOW.read_text()).items()}


def test_structure():
    workflow = load()
    assert {"name", "on", "jobs", "permissions"} <= set(workflow)
    assert workflow["permissions"] == {"contents": "read"}  # least privilege by default
    for name, job in workflow["jobs"].items():
        assert "runs-on" in job, name
        assert job["steps"], name
        for step in job["steps"]:
            assert ("uses" in step) != ("run" in step), f"{name}: {step}"
            if "uses" in step:
                assert re.fullmatch(r"[\w.-]+/[\w.-]+@v\d+", step["uses"]), step["uses"]
        for need in [job.get("needs", [])] if isinstance(job.get("needs"), str) \
                else job.get("needs", []):
            assert need in workflow["jobs"], f"{name} needs unknown job {need}"


def test_expressions_use_known_contexts():
    for expression in re.findall(r"\$\{\{(.*?)\}\}", WORKFLOW.read_text()):
        context = expression.strip().split(".")[0]
        assert context in KNOWN_CONTEXTS, expression


def test_build_runs_the_readme_test_command_and_publishes_the_site():
    jobs = load()["jobs"]
    build_steps = jobs["build"]["steps"]
    test_step = next(s for s in build_steps if s.get("run") == "make test")
    assert test_step["env"]["CI"] == "true"
    upload = next(s for s in build_steps if "upload-pages-artifact" in s.get("uses", ""))
    assert upload["with"]["path"] == "site"
    assert "chromium" in next(s["run"] for s in build_steps if "apt-get" in s.get("run", ""))
    deploy = jobs["deploy"]
    assert deploy["needs"] == "build"
    assert deploy["permissions"] == {"pages": "write", "id-token": "write"}
    assert any("deploy-pages" in s.get("uses", "") for s in deploy["steps"])
    assert "make test" in (ROOT / ".ci" / "run").read_text()
