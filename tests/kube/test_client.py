"""The HTTP client against a scripted server: retries, backoff, watch streams and relists, TLS."""

from __future__ import annotations

import datetime
import ipaddress
import socket
import ssl
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from fleetwright.kube import (
    ClusterConfig,
    EvictionOutcome,
    KubeApiError,
    KubeClient,
    KubeCluster,
    KubeConnectionError,
    Resync,
    WatchEvent,
    list_then_watch,
)
from fleetwright.kube.resources import NODES, PODS
from tests.kube.stub import Reply, StubServer, status_body


@pytest.fixture
def stub() -> Iterator[StubServer]:
    with StubServer() as server:
        yield server


class Sleeps(list[float]):
    def __call__(self, seconds: float) -> None:
        self.append(seconds)


def make_client(url: str, sleeps: Sleeps, **options: object) -> KubeClient:
    return KubeClient(ClusterConfig(url), sleep=sleeps, jitter=lambda: 1.0, **options)  # type: ignore[arg-type]


NODE = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1", "resourceVersion": "7"}}


def test_server_errors_are_retried_with_growing_backoff(stub: StubServer) -> None:
    sleeps = Sleeps()
    stub.queue(
        Reply(503, status_body(503, "ServiceUnavailable", "etcd leader changed")),
        Reply(500, status_body(500, "InternalError", "try again")),
        Reply(504, raw=b"<html>gateway timeout</html>"),
        Reply(200, NODE),
    )
    node = make_client(stub.url, sleeps, backoff_base=0.1).get(NODES, "n1")
    assert node["metadata"]["name"] == "n1"
    assert len(stub.requests) == 4
    assert sleeps == [0.1, 0.2, 0.4]


def test_throttling_waits_at_least_retry_after(stub: StubServer) -> None:
    sleeps = Sleeps()
    stub.queue(
        Reply(429, status_body(429, "TooManyRequests", "slow down"), headers={"Retry-After": "3"}),
        Reply(200, NODE),
    )
    make_client(stub.url, sleeps, backoff_base=0.1).get(NODES, "n1")
    assert sleeps == [3.0]


def test_persistent_errors_surface_after_the_last_attempt(stub: StubServer) -> None:
    sleeps = Sleeps()
    stub.queue(*[Reply(500, status_body(500, "InternalError", "boom"))] * 3)
    with pytest.raises(KubeApiError) as raised:
        make_client(stub.url, sleeps, max_attempts=3).get(NODES, "n1")
    assert (raised.value.status, raised.value.reason, raised.value.message) == (500, "InternalError", "boom")
    assert len(stub.requests) == 3
    assert len(sleeps) == 2


def test_a_non_status_error_body_is_reported_as_text(stub: StubServer) -> None:
    stub.queue(Reply(502, raw=b"<html>Bad Gateway</html>"))
    with pytest.raises(KubeApiError) as raised:
        make_client(stub.url, Sleeps(), max_attempts=1).get(NODES, "n1")
    assert (raised.value.status, raised.value.reason) == (502, "BadGateway")
    assert "Bad Gateway" in raised.value.message


def test_client_errors_are_not_retried(stub: StubServer) -> None:
    sleeps = Sleeps()
    stub.queue(Reply(403, status_body(403, "Forbidden", 'nodes "n1" is forbidden')))
    with pytest.raises(KubeApiError) as raised:
        make_client(stub.url, sleeps).get(NODES, "n1")
    assert raised.value.reason == "Forbidden"
    assert len(stub.requests) == 1
    assert sleeps == []


def test_eviction_429_is_a_blocked_result_not_a_retry(stub: StubServer) -> None:
    sleeps = Sleeps()
    stub.queue(Reply(429, status_body(429, "TooManyRequests", "Cannot evict pod as it would violate")))
    result = KubeCluster(make_client(stub.url, sleeps)).evict("default", "web-1", grace_period_seconds=10)
    assert result.outcome is EvictionOutcome.BLOCKED
    assert len(stub.requests) == 1
    assert sleeps == []
    sent = stub.requests[0]
    assert (sent.method, sent.path) == ("POST", "/api/v1/namespaces/default/pods/web-1/eviction")
    assert sent.body["apiVersion"] == "policy/v1"
    assert sent.body["deleteOptions"] == {"gracePeriodSeconds": 10}


def test_eviction_is_retried_through_a_503(stub: StubServer) -> None:
    stub.queue(
        Reply(503, status_body(503, "ServiceUnavailable", "x")),
        Reply(201, {"kind": "Status", "status": "Success", "code": 201}),
    )
    result = KubeCluster(make_client(stub.url, Sleeps())).evict("default", "web-1")
    assert result.outcome is EvictionOutcome.EVICTED


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_unreachable_server_is_a_connection_error_after_retries() -> None:
    sleeps = Sleeps()
    client = make_client(f"http://127.0.0.1:{free_port()}", sleeps, max_attempts=4)
    with pytest.raises(KubeConnectionError, match="after 4 attempts"):
        client.list(NODES)
    assert len(sleeps) == 3


def test_requests_send_the_bearer_token_and_json(stub: StubServer) -> None:
    from fleetwright.kube import StaticToken

    stub.queue(Reply(200, NODE))
    client = KubeClient(ClusterConfig(stub.url, token=StaticToken("s3cret")))
    client.patch(NODES, "n1", {"metadata": {"labels": {"a": "b"}}})
    sent = stub.requests[0]
    assert sent.headers["Authorization"] == "Bearer s3cret"
    assert sent.headers["Content-Type"] == "application/merge-patch+json"
    assert sent.body == {"metadata": {"labels": {"a": "b"}}}


# -- watches -------------------------------------------------------------------------------------------


def pod(name: str, rv: str) -> dict[str, object]:
    return {"metadata": {"name": name, "namespace": "default", "resourceVersion": rv}}


def pod_list(rv: str, *items: dict[str, object]) -> Reply:
    return Reply(200, {"kind": "PodList", "metadata": {"resourceVersion": rv}, "items": list(items)})


def test_http_410_on_watch_relists(stub: StubServer) -> None:
    stub.queue(
        pod_list("5", pod("a", "4")),
        Reply(410, status_body(410, "Expired", "too old resource version: 5 (8)")),
        pod_list("9", pod("a", "4"), pod("b", "9")),
        Reply(200, events=[{"type": "MODIFIED", "object": pod("b", "10")}]),
    )
    stream = list_then_watch(make_client(stub.url, Sleeps()), PODS, until=time.monotonic() + 10)
    first, second, third = next(stream), next(stream), next(stream)
    stream.close()
    assert isinstance(first, Resync) and [o["metadata"]["name"] for o in first.objects] == ["a"]
    assert isinstance(second, Resync) and [o["metadata"]["name"] for o in second.objects] == ["a", "b"]
    assert isinstance(third, WatchEvent) and (third.type, third.resource_version) == ("MODIFIED", "10")
    watches = [r.query for r in stub.requests if r.query.get("watch") == "true"]
    assert [w["resourceVersion"] for w in watches] == ["5", "9"]
    assert all(w["allowWatchBookmarks"] == "true" for w in watches)


def test_watch_resumes_from_bookmarks_and_last_event(stub: StubServer) -> None:
    stub.queue(
        pod_list("5"),
        Reply(
            200,
            events=[
                {"type": "ADDED", "object": pod("a", "6")},
                {"type": "BOOKMARK", "object": {"kind": "Pod", "metadata": {"resourceVersion": "12"}}},
            ],
        ),
        Reply(200, events=[{"type": "DELETED", "object": pod("a", "13")}]),
    )
    stream = list_then_watch(
        make_client(stub.url, Sleeps()), PODS, field_selector="spec.nodeName=", until=time.monotonic() + 10
    )
    items = [next(stream), next(stream), next(stream)]
    stream.close()
    assert [type(i).__name__ for i in items] == ["Resync", "WatchEvent", "WatchEvent"]
    assert [i.type for i in items if isinstance(i, WatchEvent)] == ["ADDED", "DELETED"]
    watches = [r.query for r in stub.requests if r.query.get("watch") == "true"]
    assert [w["resourceVersion"] for w in watches] == ["5", "12"]  # the bookmark moved it on
    assert all(w["fieldSelector"] == "spec.nodeName=" for w in watches)


def test_watch_survives_a_server_error_between_watches(stub: StubServer) -> None:
    sleeps = Sleeps()
    stub.queue(
        pod_list("5"),
        Reply(200, events=[{"type": "ADDED", "object": pod("a", "6")}]),
        Reply(503, status_body(503, "ServiceUnavailable", "x")),
        Reply(200, events=[{"type": "ADDED", "object": pod("b", "7")}]),
    )
    stream = list_then_watch(make_client(stub.url, sleeps), PODS, until=time.monotonic() + 10)
    items = [next(stream), next(stream), next(stream)]
    stream.close()
    assert [i.object["metadata"]["name"] for i in items if isinstance(i, WatchEvent)] == ["a", "b"]
    watches = [r.query["resourceVersion"] for r in stub.requests if r.query.get("watch") == "true"]
    assert watches == ["5", "6", "6"]
    assert len(sleeps) == 1


def test_watch_error_event_other_than_410_is_raised(stub: StubServer) -> None:
    stub.queue(
        pod_list("5"),
        Reply(200, events=[{"type": "ERROR", "object": status_body(403, "Forbidden", "no watch for you")}]),
    )
    stream = list_then_watch(make_client(stub.url, Sleeps()), PODS, until=time.monotonic() + 10)
    assert isinstance(next(stream), Resync)
    with pytest.raises(KubeApiError, match="no watch for you"):
        next(stream)


# -- TLS -----------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[bytes, Path, Path]:
    """A self-signed certificate for 127.0.0.1: (PEM, cert file, key file)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kube-apiserver")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
        .sign(key, hashes.SHA256())
    )
    pem = cert.public_bytes(serialization.Encoding.PEM)
    folder = tmp_path_factory.mktemp("tls")
    (folder / "cert.pem").write_bytes(pem)
    (folder / "key.pem").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return pem, folder / "cert.pem", folder / "key.pem"


@pytest.fixture
def tls_stub(certificate: tuple[bytes, Path, Path]) -> Iterator[StubServer]:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(certificate[1], certificate[2])
    with StubServer(tls=context) as server:
        yield server


def test_tls_verifies_the_server_against_the_cluster_ca(
    tls_stub: StubServer, certificate: tuple[bytes, Path, Path]
) -> None:
    tls_stub.queue(Reply(200, NODE))
    client = KubeClient(ClusterConfig(tls_stub.url, ca_data=certificate[0]))
    assert client.get(NODES, "n1")["metadata"]["name"] == "n1"


def test_tls_with_an_unknown_ca_fails_without_retrying(tls_stub: StubServer) -> None:
    sleeps = Sleeps()
    client = make_client(tls_stub.url, sleeps)
    with pytest.raises(KubeConnectionError, match="TLS"):
        client.get(NODES, "n1")
    assert sleeps == []


def test_insecure_skip_tls_verify_accepts_any_certificate(tls_stub: StubServer) -> None:
    tls_stub.queue(Reply(200, NODE))
    client = KubeClient(ClusterConfig(tls_stub.url, insecure=True))
    with pytest.warns(Warning):  # urllib3 warns about unverified HTTPS, as it should
        assert client.get(NODES, "n1")["metadata"]["name"] == "n1"
