"""The bare mkdocs-material reference page (scripts/audit/reference.py), built for the
tests: the accessibility and HTML-validity tests hold the project's pages to "nothing
worse than the theme itself"."""
from scripts.audit import reference

from conftest import ROOT

PAGE = reference.PAGE


def build_reference(directory):
    """Build the reference site under `directory`; return the site folder."""
    try:
        return reference.build_reference(directory, ROOT)
    except reference.ReferenceBuildFailed as error:
        raise AssertionError(str(error)) from None
