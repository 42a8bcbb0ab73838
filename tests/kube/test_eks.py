"""EKS bearer tokens: a correctly presigned STS GetCallerIdentity URL, renewed before it goes stale."""

from __future__ import annotations

import base64
import hashlib
import hmac
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, quote, urlsplit

import boto3
import pytest
from botocore.credentials import Credentials
from moto import mock_aws

import fleetwright.kube
from fleetwright.kube import KubeClient, KubeConnectionError
from fleetwright.kube.eks import (
    TOKEN_PREFIX,
    EksTokenSource,
    cluster_config,
    describe_endpoint,
    eks_token,
    sts_endpoint,
)
from tests.support.clock import FakeClock

SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
CREDS = Credentials("AKIDEXAMPLE", SECRET, "session-token-123")


def decode(token: str) -> str:
    assert token.startswith(TOKEN_PREFIX)
    payload = token[len(TOKEN_PREFIX) :]
    assert "=" not in payload, "the token must be unpadded"
    return base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)).decode()


def _hmac(key: bytes, text: str) -> bytes:
    return hmac.new(key, text.encode(), hashlib.sha256).digest()


def expected_signature(url: str, secret: str, cluster: str) -> str:
    """SigV4 for a presigned GET, computed from the AWS specification independently of botocore."""
    parts = urlsplit(url)
    params = [(k, v) for k, v in parse_qsl(parts.query) if k != "X-Amz-Signature"]
    canonical_query = "&".join(f"{quote(k, safe='-_.~')}={quote(v, safe='-_.~')}" for k, v in sorted(params))
    query = dict(params)
    signed = query["X-Amz-SignedHeaders"]
    header_values = {"host": parts.netloc, "x-k8s-aws-id": cluster}
    canonical_headers = "".join(f"{h}:{header_values[h]}\n" for h in signed.split(";"))
    canonical_request = "\n".join(
        ["GET", parts.path, canonical_query, canonical_headers, signed, hashlib.sha256(b"").hexdigest()]
    )
    _, date, region, service, _ = query["X-Amz-Credential"].split("/")
    scope = f"{date}/{region}/{service}/aws4_request"
    to_sign = "\n".join(
        [
            "AWS4-HMAC-SHA256",
            query["X-Amz-Date"],
            scope,
            hashlib.sha256(canonical_request.encode()).hexdigest(),
        ]
    )
    key = _hmac(("AWS4" + secret).encode(), date)
    for part in (region, service, "aws4_request"):
        key = _hmac(key, part)
    return hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()


def test_token_is_a_presigned_caller_identity_url_for_the_regional_sts_endpoint() -> None:
    url = decode(eks_token("prod-cluster", "eu-west-1", CREDS))
    parts = urlsplit(url)
    query = dict(parse_qsl(parts.query))
    assert f"{parts.scheme}://{parts.netloc}" == "https://sts.eu-west-1.amazonaws.com"
    assert query["Action"] == "GetCallerIdentity"
    assert query["Version"] == "2011-06-15"
    assert query["X-Amz-Algorithm"] == "AWS4-HMAC-SHA256"
    assert query["X-Amz-Expires"] == "60"
    assert "x-k8s-aws-id" in query["X-Amz-SignedHeaders"].split(";")
    assert query["X-Amz-Credential"].startswith("AKIDEXAMPLE/")
    assert query["X-Amz-Credential"].endswith("/eu-west-1/sts/aws4_request")
    assert query["X-Amz-Security-Token"] == "session-token-123"


def test_token_signature_covers_the_cluster_name() -> None:
    url = decode(eks_token("prod-cluster", "us-east-2", CREDS))
    signature = dict(parse_qsl(urlsplit(url).query))["X-Amz-Signature"]
    assert signature == expected_signature(url, SECRET, "prod-cluster")
    # The same URL presented for another cluster does not verify: the token is bound to its cluster.
    assert signature != expected_signature(url, SECRET, "other-cluster")


def test_china_regions_use_the_china_sts_domain() -> None:
    assert sts_endpoint("cn-north-1") == "https://sts.cn-north-1.amazonaws.com.cn"
    assert sts_endpoint("ap-southeast-2") == "https://sts.ap-southeast-2.amazonaws.com"


class RotatingCredentials:
    """Credentials that change on every read, recording when each was read (a token's birth time)."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.reads: list[float] = []

    def __call__(self) -> Credentials:
        self.reads.append(self.clock.now)
        return Credentials(f"AKID{len(self.reads):04d}", SECRET, None)


def access_key(token: str) -> str:
    return dict(parse_qsl(urlsplit(decode(token)).query))["X-Amz-Credential"].split("/")[0]


def test_token_is_reused_while_fresh_and_renewed_before_fourteen_minutes() -> None:
    clock = FakeClock(1000.0)
    creds = RotatingCredentials(clock)
    source = EksTokenSource("c", "us-east-1", creds, clock=clock)
    first = source.token()
    clock.now += 12 * 60
    assert source.token() == first
    assert len(creds.reads) == 1
    for _ in range(120):  # one hour in 30-second steps
        clock.now += 30
        token = source.token()
        # creds.reads[-1] is when the token just returned was made.
        assert access_key(token) == f"AKID{len(creds.reads):04d}"
        assert clock.now - creds.reads[-1] < 14 * 60, "a token older than 14 minutes was handed out"
    assert len(creds.reads) >= 4  # renewed several times over the hour


def test_refresh_forces_a_new_token() -> None:
    clock = FakeClock(1000.0)
    creds = RotatingCredentials(clock)
    source = EksTokenSource("c", "us-east-1", creds, clock=clock)
    first = source.token()
    second = source.token(refresh=True)
    assert access_key(first) == "AKID0001"
    assert access_key(second) == "AKID0002"
    assert source.token() == second


def test_refreshable_credentials_are_frozen_per_token() -> None:
    class Refreshable:
        def get_frozen_credentials(self) -> Credentials:
            return Credentials("AKIDFROZEN", SECRET, "frozen-token")

    token = EksTokenSource("c", "us-west-2", Refreshable()).token()
    query = dict(parse_qsl(urlsplit(decode(token)).query))
    assert query["X-Amz-Credential"].startswith("AKIDFROZEN/")
    assert query["X-Amz-Security-Token"] == "frozen-token"


def create_cluster(eks: Any) -> dict[str, Any]:
    cluster: dict[str, Any] = eks.create_cluster(
        name="prod",
        roleArn="arn:aws:iam::123456789012:role/eks",
        resourcesVpcConfig={"subnetIds": ["subnet-1"]},
    )["cluster"]
    return cluster


class CountingEks:
    """A boto3 EKS client that counts DescribeCluster calls."""

    def __init__(self, eks: Any) -> None:
        self.eks = eks
        self.describes = 0

    def describe_cluster(self, **kwargs: Any) -> Any:
        self.describes += 1
        return self.eks.describe_cluster(**kwargs)


@mock_aws
def test_for_eks_describes_the_cluster_when_given_no_endpoint() -> None:
    eks = boto3.client("eks", region_name="us-east-1")
    created = create_cluster(eks)
    counting = CountingEks(eks)
    client = KubeClient.for_eks("prod", "us-east-1", eks_client=counting, credentials=CREDS)
    assert counting.describes == 1
    assert client.configuration.host == created["endpoint"].rstrip("/")
    ca = base64.b64decode(created["certificateAuthority"]["data"])
    assert Path(client.configuration.ssl_ca_cert).read_bytes() == ca
    header = client.configuration.get_api_key_with_prefix("authorization")
    assert decode(header.removeprefix("Bearer ")).startswith("https://sts.us-east-1.amazonaws.com/?")


def test_for_eks_with_a_known_endpoint_describes_nothing() -> None:
    ca = base64.b64encode(b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n").decode()
    client = KubeClient.for_eks(
        "prod",
        "eu-west-1",
        endpoint="https://ABC.gr7.eu-west-1.eks.amazonaws.com",
        certificate_authority=ca,
        credentials=CREDS,
    )
    assert client.configuration.host == "https://ABC.gr7.eu-west-1.eks.amazonaws.com"
    header = client.configuration.get_api_key_with_prefix("authorization")
    assert "sts.eu-west-1.amazonaws.com" in decode(header.removeprefix("Bearer "))


def test_a_boto3_session_supplies_the_credentials() -> None:
    session = boto3.Session(
        aws_access_key_id="AKIDSESSION", aws_secret_access_key=SECRET, region_name="us-east-1"
    )
    token = cluster_config(
        "prod", "us-east-1", endpoint="https://x", certificate_authority=None, credentials=session
    ).token
    assert token is not None
    assert access_key(token.token()) == "AKIDSESSION"


@pytest.mark.parametrize(
    ("endpoint", "ca", "message"),
    [("", None, "has no API endpoint"), ("https://x", "!!not base64", "not base64")],
)
def test_unusable_cluster_answers_are_explained(endpoint: str, ca: str | None, message: str) -> None:
    with pytest.raises(KubeConnectionError, match=message):
        cluster_config("prod", "us-east-1", endpoint=endpoint, certificate_authority=ca, credentials=CREDS)


@mock_aws
def test_describing_a_missing_cluster_fails() -> None:
    eks = boto3.client("eks", region_name="us-east-1")
    with pytest.raises(eks.exceptions.ResourceNotFoundException):
        describe_endpoint(eks, "absent")


def test_importing_the_adapter_loads_neither_boto_nor_the_official_client() -> None:
    layers = Path(fleetwright.kube.__file__).resolve().parents[2]
    code = (
        "import sys, fleetwright.kube, fleetwright.kube.eks, fleetwright.kube.cluster; "
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'boto3', 'botocore', 'kubernetes'}))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONPATH": str(layers)},
    )
    assert result.stdout.strip() == "[]"
