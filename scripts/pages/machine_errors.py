"""mkdocs hooks: what the machine refuses a build or the server (a full disk, a folder it may
not write, a port in use) as one line with its fix, where mkdocs prints a traceback."""
import errno
import logging

from mkdocs.exceptions import Abort

from scripts import display

log = logging.getLogger("mkdocs")
FULL = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)


def on_build_error(error):
    """mkdocs logs a BuildError in one line and re-raises anything else after this event;
    an OSError is the machine's answer, not a bug, so it is one line too."""
    if isinstance(error, OSError):
        where = display(error.filename) if error.filename else "the build"
        fix = "free space on its disk" if error.errno in FULL else "check its permissions"
        log.error(f"{where}: {error.strerror or error}; {fix}, then build again")
        raise Abort("Aborted: the machine refused a write or a read") from None


def on_serve(server, config, builder):
    """mkdocs binds its port after the first build; a port in use is one line."""
    bind = server.server_bind

    def bind_or_say():
        try:
            bind()
        except OSError as error:
            host, port = config["dev_addr"]
            log.error(f"cannot serve on {host}:{port}: {error.strerror or error}; stop what "
                      f"uses it, or serve elsewhere: mkdocs serve --dev-addr {host}:<port>")
            raise Abort("Aborted: nothing is served") from None

    server.server_bind = bind_or_say
    return server
