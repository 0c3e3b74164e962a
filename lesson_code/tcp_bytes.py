"""The bytes this process has sent over TCP, as the Linux kernel counts them.

Between processes on CPU, JAX's collectives travel over gloo's TCP connections, and Linux
keeps a count of the payload bytes each connection sent. Read before and after a batch of
calls, the counts say what the calls sent, without trusting any library's own account.
Nothing here knows a lesson: any lesson's rank module can import it. Linux only.
"""
import fcntl
import ipaddress
import os
import socket
import struct
import time


# --8<-- [start:count_bytes]
BYTES_SENT_AT = 200  # offset of u64 tcpi_bytes_sent in Linux's struct tcp_info (4.19+)
# The u64 right after it, tcpi_bytes_retrans: bytes sent again. Loopback loses nothing,
# but while a receiver waits for a core its acknowledgement comes late, and the sender's
# timer resends the tail of what it sent: tens of bytes per call at most, not gloo's.
BYTES_RETRANS_AT = 208
SIOCOUTQ = 0x5411  # ioctl: bytes a socket still holds, not yet sent or not yet acknowledged


def tcp_sockets():
    """This process's TCP sockets, each as a duplicate of its descriptor: closing our
    socket object must not close gloo's."""
    for fd in os.listdir("/proc/self/fd"):
        try:
            if not os.readlink(f"/proc/self/fd/{fd}").startswith("socket:"):
                continue
            sock = socket.socket(fileno=os.dup(int(fd)))
        except OSError:
            continue  # closed since listdir, or a socket Python cannot wrap
        with sock:
            if sock.type == socket.SOCK_STREAM and sock.family != socket.AF_UNIX:
                yield sock


def wait_until_sent(sock, timeout_s=2.0):
    """A call can finish here while its last bytes to a slower rank still sit in this
    socket's queue; counted now, they would land in the next window. Wait them out."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        queued = fcntl.ioctl(sock.fileno(), SIOCOUTQ, b"\0" * 4)
        if struct.unpack("i", queued)[0] == 0:
            return
        time.sleep(0.001)


def tcp_bytes_sent(coordinator_port):
    """(payload bytes sent so far on this process's TCP connections, each byte once; bytes
    sent again), the kernel's counts. A retransmission is the transport's doing, not the
    collective's: it is kept apart, so the page can show how big it was.

    Connections to or from the coordinator port carry jax.distributed's gRPC (start-up,
    heartbeats), not collectives, so they are left out.
    """
    total = resent_total = 0
    for sock in tcp_sockets():
        try:
            ports = {sock.getsockname()[1], sock.getpeername()[1]}
        except OSError:
            continue  # listening, not connected: it sends nothing
        if coordinator_port not in ports:
            wait_until_sent(sock)
            info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 256)
            sent, resent = struct.unpack_from("QQ", info, BYTES_SENT_AT)
            total += sent - resent
            resent_total += resent
    return total, resent_total


def bytes_sent_over(calls, coordinator_port, program, *args):
    """(bytes this process sends during `calls` finished calls of `program`, bytes it
    sent again in that time)."""
    program(*args).block_until_ready()  # compile, and let gloo open its connections
    before, resent_before = tcp_bytes_sent(coordinator_port)
    for _ in range(calls):
        program(*args).block_until_ready()
    after, resent_after = tcp_bytes_sent(coordinator_port)
    return after - before, resent_after - resent_before
# --8<-- [end:count_bytes]


def coordinator_connection():
    """(host, port) of the jax.distributed coordinator, as this process reaches it.

    JAX keeps the address it chose (from a launcher's environment, or as given) to itself,
    so it is read off this process's sockets, right after `jax.distributed.initialize`
    and before any collective opened a connection: every TCP socket then is the
    coordinator's gRPC. Process 0 serves it, so its port is the one it listens on; the
    others' connections all lead to it. The host is the IP address a connection to that
    port reached.
    """
    listening, peers = set(), set()
    for sock in tcp_sockets():
        try:
            peers.add(sock.getpeername()[:2])
        except OSError:
            listening.add(sock.getsockname()[1])
    ports = listening or {port for _, port in peers}
    hosts = {host for host, port in peers if port in ports}
    if len(ports) != 1 or not hosts:
        raise RuntimeError(f"cannot tell jax.distributed's coordinator among this process's "
                           f"TCP sockets (listening on {sorted(listening)}, connected to "
                           f"{sorted(peers)}); was jax.distributed.initialize called first?")
    # gRPC dials IPv4 over IPv6 sockets: ::ffff:127.0.0.1 is 127.0.0.1.
    address = ipaddress.ip_address(min(hosts).split("%")[0])
    return str(address.ipv4_mapped or address), ports.pop()
