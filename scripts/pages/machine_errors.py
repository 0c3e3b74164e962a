"""mkdocs hooks: a full disk, a folder it may not write or a port in use is one line with
its fix, where mkdocs prints a traceback."""
import errno
import logging

from mkdocs.exceptions import Abort

from scripts import display

log = logging.getLogger("mkdocs")


def on_build_error(error):
    """mkdocs re-raises what is no BuildError after this event: an OSError is one line."""
    if isinstance(error, OSError):
        where = display(error.filename) if error.filename else "the build"
        fix = "free space on its disk" if error.errno == errno.ENOSPC else "check its permissions"
        log.error(f"{where}: {error.strerror or error}; {fix}, then build again")
        raise Abort("Aborted: the machine refused a write or a read") from None


def on_serve(server, config, builder):
    """mkdocs binds its port after the first build: a port in use is one line."""
    bind, (host, port) = server.server_bind, config["dev_addr"]

    def bind_or_say():
        try:
            bind()
        except OSError as error:
            log.error(f"cannot serve on {host}:{port}: {error.strerror or error}; stop what "
                      f"uses it, or serve on another: mkdocs serve --dev-addr {host}:<port>")
            raise Abort("Aborted: nothing is served") from None

    server.server_bind = bind_or_say
    return server
