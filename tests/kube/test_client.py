"""``KubeClient`` on the official client, against a scripted server: retries and backoff, Retry-After,
401 → a fresh token, EKS tokens renewed before expiry, paging, timeouts, watch streams and relists, TLS."""

from __future__ import annotations

import base64
import datetime
import ipaddress
import socket
import ssl
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

import pytest
from botocore.credentials import Credentials
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
    StaticToken,
    WatchEvent,
    WatchExpiredError,
    list_then_watch,
)
from fleetwright.kube.client import JSON_PATCH
from fleetwright.kube.eks import EksTokenSource
from fleetwright.kube.resources import NODES, PODS
from fleetwright.local.apiserver import ApiServer
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
    stub.queue(Reply(200, NODE))
    client = KubeClient(ClusterConfig(stub.url, token=StaticToken("s3cret")))
    client.patch(NODES, "n1", {"metadata": {"labels": {"a": "b"}}})
    sent = stub.requests[0]
    assert sent.headers["authorization"] == "Bearer s3cret"
    assert sent.headers["content-type"] == "application/merge-patch+json"
    assert sent.headers["user-agent"] == "fleetwright"
    assert sent.body == {"metadata": {"labels": {"a": "b"}}}


def test_json_patch_and_delete_options_go_as_sent(stub: StubServer) -> None:
    stub.queue(Reply(200, NODE), Reply(200, {"kind": "Status", "status": "Success"}))
    client = make_client(stub.url, Sleeps())
    operations = [{"op": "test", "path": "/spec/unschedulable", "value": True}]
    client.patch(NODES, "n1", operations, patch_type=JSON_PATCH)
    client.delete(PODS, "p", "default", grace_period_seconds=0, preconditions={"uid": "u-1"})
    patch, delete = stub.requests
    assert (patch.headers["content-type"], patch.body) == ("application/json-patch+json", operations)
    assert (delete.method, delete.path) == ("DELETE", "/api/v1/namespaces/default/pods/p")
    assert delete.body["gracePeriodSeconds"] == 0
    assert delete.body["preconditions"] == {"uid": "u-1"}


class SwitchingToken:
    """Hands out a stale token until asked to refresh (as after a 401)."""

    def __init__(self) -> None:
        self.current = "stale"
        self.refreshes = 0

    def token(self, refresh: bool = False) -> str:
        if refresh:
            self.refreshes += 1
            self.current = f"fresh-{self.refreshes}"
        return self.current


def test_a_401_gets_a_fresh_token_and_one_more_try(stub: StubServer) -> None:
    source = SwitchingToken()
    stub.queue(Reply(401, status_body(401, "Unauthorized", "Unauthorized")), Reply(200, NODE))
    client = KubeClient(ClusterConfig(stub.url, token=source), sleep=Sleeps())
    assert client.get(NODES, "n1")["metadata"]["name"] == "n1"
    assert [r.headers["authorization"] for r in stub.requests] == ["Bearer stale", "Bearer fresh-1"]


def test_a_token_rejected_twice_is_an_unauthorized_error(stub: StubServer) -> None:
    source = SwitchingToken()
    stub.queue(*[Reply(401, status_body(401, "Unauthorized", "Unauthorized"))] * 2)
    client = KubeClient(ClusterConfig(stub.url, token=source), sleep=Sleeps())
    with pytest.raises(KubeApiError) as raised:
        client.get(NODES, "n1")
    assert (raised.value.status, raised.value.reason) == (401, "Unauthorized")
    assert len(stub.requests) == 2
    assert source.refreshes == 1


def test_eks_tokens_are_renewed_before_they_expire(stub: StubServer) -> None:
    clock = [1000.0]
    made: list[float] = []

    def credentials() -> Credentials:
        made.append(clock[0])
        return Credentials(f"AKID{len(made):04d}", "secret", None)

    source = EksTokenSource("prod", "us-east-1", credentials, clock=lambda: clock[0])
    client = KubeClient(ClusterConfig(stub.url, token=source), sleep=Sleeps())
    for _ in range(4):  # 0, 5, 10 and 15 minutes
        stub.queue(Reply(200, NODE))
        client.get(NODES, "n1")
        clock[0] += 5 * 60
    keys = [eks_access_key(r.headers["authorization"]) for r in stub.requests]
    assert keys == ["AKID0001", "AKID0001", "AKID0001", "AKID0002"]  # renewed at 15 min, not later


def eks_access_key(header: str) -> str:
    token = header.removeprefix("Bearer k8s-aws-v1.")
    url = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode()
    return dict(parse_qsl(urlsplit(url).query))["X-Amz-Credential"].split("/")[0]


# -- paging and timeouts -------------------------------------------------------------------------------


def test_list_follows_continue_tokens_and_keeps_the_first_resource_version(stub: StubServer) -> None:
    stub.queue(
        Reply(200, {"metadata": {"resourceVersion": "40", "continue": "page-2"}, "items": [{"a": 1}]}),
        Reply(200, {"metadata": {"resourceVersion": "41", "continue": ""}, "items": [{"a": 2}, {"a": 3}]}),
    )
    listing = make_client(stub.url, Sleeps()).list(NODES, label_selector="pool=x", page_size=2)
    assert [i["a"] for i in listing.items] == [1, 2, 3]
    assert all(i["kind"] == "Node" and i["apiVersion"] == "v1" for i in listing.items)
    assert listing.resource_version == "40"
    first, second = (r.query for r in stub.requests)
    assert first == {"labelSelector": "pool=x", "limit": "2"}
    assert second == {"labelSelector": "pool=x", "limit": "2", "continue": "page-2"}


def test_list_pages_through_the_emulator(apiserver: ApiServer, client: KubeClient) -> None:
    for i in range(7):
        client.create(NODES, {"metadata": {"name": f"n{i}"}})
    assert sorted(n["metadata"]["name"] for n in client.list(NODES, page_size=3).items) == [
        f"n{i}" for i in range(7)
    ]


def test_a_slow_answer_times_out_and_is_retried(stub: StubServer) -> None:
    sleeps = Sleeps()
    stub.queue(Reply(200, NODE, delay=1.0), Reply(200, NODE))
    client = make_client(stub.url, sleeps, read_timeout=0.2)
    assert client.get(NODES, "n1")["metadata"]["name"] == "n1"
    assert len(stub.requests) == 2
    assert len(sleeps) == 1


def test_a_server_that_never_answers_is_a_connection_error(stub: StubServer) -> None:
    stub.queue(*[Reply(200, NODE, delay=1.0)] * 2)
    client = make_client(stub.url, Sleeps(), read_timeout=0.2, max_attempts=2)
    with pytest.raises(KubeConnectionError, match="after 2 attempts"):
        client.get(NODES, "n1")


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


def test_expired_error_event_relists(stub: StubServer) -> None:
    stub.queue(
        pod_list("5", pod("a", "4")),
        Reply(200, events=[{"type": "ERROR", "object": status_body(410, "Expired", "too old: 5")}]),
        pod_list("20"),
        Reply(200, events=[{"type": "ADDED", "object": pod("c", "21")}]),
    )
    stream = list_then_watch(make_client(stub.url, Sleeps()), PODS, until=time.monotonic() + 10)
    items = [next(stream), next(stream), next(stream)]
    stream.close()
    assert [type(i).__name__ for i in items] == ["Resync", "Resync", "WatchEvent"]
    assert isinstance(items[1], Resync) and items[1].objects == ()
    watches = [r.query["resourceVersion"] for r in stub.requests if r.query.get("watch") == "true"]
    assert watches == ["5", "20"]


def test_a_single_watch_raises_expired_for_the_caller_to_relist(stub: StubServer) -> None:
    stub.queue(Reply(200, events=[{"type": "ERROR", "object": status_body(410, "Expired", "too old: 5")}]))
    with pytest.raises(WatchExpiredError) as raised:
        list(make_client(stub.url, Sleeps()).watch(PODS, resource_version="5"))
    assert (raised.value.status, raised.value.reason) == (410, "Expired")
    assert "too old" in raised.value.message


def test_a_watch_cut_off_mid_stream_resumes_from_the_last_event(stub: StubServer) -> None:
    sleeps = Sleeps()
    stub.queue(
        pod_list("5"),
        Reply(200, events=[{"type": "ADDED", "object": pod("a", "6")}], cut=True),
        Reply(200, events=[{"type": "ADDED", "object": pod("b", "7")}]),
    )
    stream = list_then_watch(make_client(stub.url, sleeps), PODS, until=time.monotonic() + 10)
    items = [next(stream), next(stream), next(stream)]
    stream.close()
    assert [i.object["metadata"]["name"] for i in items if isinstance(i, WatchEvent)] == ["a", "b"]
    watches = [r.query["resourceVersion"] for r in stub.requests if r.query.get("watch") == "true"]
    assert watches == ["5", "6"]
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


# -- faults injected into the emulator ----------------------------------------------------------------


def test_emulator_throttling_and_server_errors_are_ridden_out(apiserver: ApiServer) -> None:
    sleeps = Sleeps()
    client = make_client(apiserver.url, sleeps)
    client.create(NODES, {"metadata": {"name": "n1"}})
    apiserver.faults.inject(503, verb="GET", resource="nodes", times=2)
    apiserver.faults.inject(429, verb="PATCH", resource="nodes", retry_after=2)
    assert [n["metadata"]["name"] for n in client.list(NODES).items] == ["n1"]
    node = client.patch(NODES, "n1", {"metadata": {"labels": {"team": "a"}}})
    assert node["metadata"]["labels"]["team"] == "a"
    assert sleeps == [0.2, 0.4, 2.0]  # two backoffs for the 503s, then the server's Retry-After


def test_an_emulator_outage_is_a_connection_error_once_the_attempts_run_out(apiserver: ApiServer) -> None:
    sleeps = Sleeps()
    client = make_client(apiserver.url, sleeps, max_attempts=3)
    apiserver.faults.down()
    with pytest.raises(KubeConnectionError, match="after 3 attempts"):
        client.get(NODES, "n1")
    assert apiserver.faults.reset_connections == 3
    apiserver.faults.up()
    with pytest.raises(KubeApiError) as raised:
        client.get(NODES, "n1")
    assert raised.value.not_found
