"""Egress: a script cannot reach any network. Only ``lo`` exists (``--network none``).

Every attempt starts inside the container and fails there at once; the host never sends traffic.
The one host-side listener here is on loopback (and an abstract unix socket), to prove that the
container's ``127.0.0.1`` and abstract socket names are not the host's.

Covered elsewhere: the interface list and TCP to a documentation address and to 172.17.0.1
(tests/sandbox/test_sandbox_session.py::test_the_network_is_unreachable).
"""

from __future__ import annotations

import socket
import uuid
from collections.abc import Iterator

import pytest

from sandbox import Sandbox
from tests.docker_cli import EngineWithCLI
from tests.security.probes import probe, run_ok

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def gateway(docker_engine: EngineWithCLI) -> str:
    """The engine's bridge gateway address (the host side of the default bridge network)."""
    address = docker_engine.text(
        ["network", "inspect", "bridge", "--format", "{{range .IPAM.Config}}{{.Gateway}}{{end}}"]
    )
    return address or "172.17.0.1"


CASES = {
    # name: (expression, expected outcome)
    "dns_lookup": ("socket.getaddrinfo('example.com', 443)", "gaierror"),
    "dns_query_to_public_resolver": (
        "socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'\\0' * 12, ('8.8.8.8', 53))",
        "ENETUNREACH",
    ),
    "tcp_to_gateway": ("socket.create_connection((GATEWAY, 2375), timeout=3)", "ENETUNREACH"),
    "udp_to_gateway": ("socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'x', (GATEWAY, 53))", "ENETUNREACH"),
    "tcp_to_metadata": ("socket.create_connection(('169.254.169.254', 80), timeout=3)", "ENETUNREACH"),
    "udp_to_metadata": (
        "socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'x', ('169.254.169.254', 80))",
        "ENETUNREACH",
    ),
    "tcp_to_public_v4": ("socket.create_connection(('1.1.1.1', 443), timeout=3)", "ENETUNREACH"),
    "tcp_to_public_v6": ("socket.create_connection(('2606:4700:4700::1111', 443), timeout=3)", "EADDRNOTAVAIL"),
    "udp_to_public_v6": (
        "socket.socket(socket.AF_INET6, socket.SOCK_DGRAM).sendto(b'x', ('2606:4700:4700::1111', 53))",
        "EADDRNOTAVAIL",
    ),
    "icmp_echo": (
        "socket.socket(socket.AF_INET, socket.SOCK_DGRAM, socket.IPPROTO_ICMP).sendto(b'\\x08' + b'\\0' * 7, "
        "('1.1.1.1', 0))",
        "ENETUNREACH",
    ),
    "raw_ip_socket": ("socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)", "EPERM"),
    "raw_packet_socket": ("socket.socket(socket.AF_PACKET, socket.SOCK_RAW)", "EPERM"),
    "vsock_to_the_hypervisor": ("socket.socket(40, socket.SOCK_STREAM)", "EPERM"),
    "take_lo_down": (  # SIOCSIFFLAGS needs CAP_NET_ADMIN
        "__import__('fcntl').ioctl(socket.socket(), 0x8914, b'lo'.ljust(16, b'\\0') + bytes(24))",
        "EPERM",
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_an_egress_attempt_fails_inside_the_container(shared: Sandbox, gateway: str, name: str) -> None:
    expression, expected = CASES[name]
    assert probe(shared, name, expression, setup=f"GATEWAY = {gateway!r}") == f"{name}: {expected}"


def test_only_loopback_exists_and_there_is_no_route(shared: Sandbox) -> None:
    code = (
        "import socket\n"
        "print(socket.if_nameindex())\n"
        "print(open('/proc/net/route').read().splitlines()[1:])\n"
        "print(sorted({(l.split()[0], l.split()[-1]) for l in open('/proc/net/if_inet6')}))\n"
    )
    names, routes, addresses = run_ok(shared, code).splitlines()
    assert (names, routes) == ("[(1, 'lo')]", "[]")
    # Docker 20.10 takes IPv6 off a `--network none` container; 26 and later, and gVisor, leave ::1 on lo
    assert addresses in ("[]", "[('00000000000000000000000000000001', 'lo')]")


@pytest.fixture
def host_loopback_listener() -> Iterator[int]:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        server.settimeout(0)
        yield server.getsockname()[1]
        with pytest.raises(BlockingIOError):
            server.accept()  # nothing from the sandbox ever connected


def test_the_hosts_loopback_is_not_the_containers(shared: Sandbox, host_loopback_listener: int) -> None:
    expression = f"socket.create_connection(('127.0.0.1', {host_loopback_listener}), timeout=3)"
    assert probe(shared, "host_loopback", expression) == "host_loopback: ECONNREFUSED"


def test_the_hosts_abstract_unix_sockets_are_not_reachable(shared: Sandbox) -> None:
    name = f"\0tooltree-test-{uuid.uuid4().hex}"
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(name)
        server.listen()
        server.settimeout(0)
        expression = f"socket.socket(socket.AF_UNIX).connect({name!r})"
        assert probe(shared, "abstract", expression) == "abstract: ECONNREFUSED"
        with pytest.raises(BlockingIOError):
            server.accept()
