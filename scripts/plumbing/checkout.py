"""One rule for every path a pull request controls: a real file or folder of the checkout.

A committed link could publish `/etc/hostname` or `.git`, read /dev/zero to the end of
memory, or let `--render-only` write elsewhere; so every command and the site build refuse
any link under CONTROLLED, in one line, before they read, copy or write anything.
"""
import os
from pathlib import Path

from scripts import ROOT

# What a pull request commits and the commands and the build read or write.
CONTROLLED = ("docs", "recordings", "figures", "lesson_code", ".run.lock", ".cache")


class LinkInCheckout(Exception):
    """A controlled path is a symbolic link; str() is the one line naming it."""

    def __init__(self, link, root):
        name = Path(link).relative_to(root).as_posix()
        super().__init__(f"{name} is a symbolic link (to {os.readlink(link)[:120]!r}); what "
                         f"the pages, recordings and figures are made of must be files "
                         f"inside the checkout: replace the link with the file itself, or "
                         f"`git rm {name}`")


def no_link(name, flags):
    """open()'s opener for a file the checkout holds: never through a link, never waiting on
    a pipe."""
    return os.open(name, flags | os.O_NOFOLLOW | os.O_NONBLOCK)


def refuse_links(root=ROOT):
    """Raise LinkInCheckout for the first link under CONTROLLED (os.walk does not follow it)."""
    root = Path(root)
    for part in CONTROLLED:
        top = root / part
        if top.is_symlink():
            raise LinkInCheckout(top, root)
        for folder, folders, files in os.walk(top):
            for name in sorted(folders + files):
                if os.path.islink(os.path.join(folder, name)):
                    raise LinkInCheckout(Path(folder, name), root)
