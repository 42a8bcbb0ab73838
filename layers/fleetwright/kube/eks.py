"""EKS authentication from outside the cluster: bearer tokens made from a presigned STS
``GetCallerIdentity`` URL (what ``aws eks get-token`` produces), renewed before they expire.

The official client has no EKS authentication of its own (a kubeconfig would shell out to the AWS CLI,
which Lambda does not have), so this stays ours; the official ``Configuration`` asks
:class:`EksTokenSource` for the token before every request. The endpoint and CA are passed in (the
controllers already described the cluster through ``fleetwright.aws``), and botocore is imported only when
a token is made, so importing ``fleetwright.kube`` stays cheap on a Lambda cold start.
"""

from __future__ import annotations

import base64
import binascii
import threading
import time
from collections.abc import Callable
from typing import Any

from fleetwright.kube.config import ClusterConfig
from fleetwright.kube.errors import KubeConnectionError

TOKEN_PREFIX = "k8s-aws-v1."
CLUSTER_ID_HEADER = "x-k8s-aws-id"
# The presigned URL itself is short-lived; the API server accepts the token for 15 minutes after signing.
PRESIGN_EXPIRES_SECONDS = 60
TOKEN_LIFETIME_SECONDS = 15 * 60
# Renew one minute before the 14-minute mark, leaving room for clock skew and slow requests.
REFRESH_AFTER_SECONDS = 13 * 60
STS_API_VERSION = "2011-06-15"

CredentialsProvider = Callable[[], Any]


def sts_endpoint(region: str) -> str:
    """The regional STS endpoint (``https://sts.us-east-1.amazonaws.com``; ``.amazonaws.com.cn`` in China)."""
    suffix = "amazonaws.com.cn" if region.startswith("cn-") else "amazonaws.com"
    return f"https://sts.{region}.{suffix}"


def presigned_caller_identity_url(cluster: str, region: str, credentials: Any) -> str:
    """A SigV4 query-string-signed STS ``GetCallerIdentity`` URL that also signs ``x-k8s-aws-id: cluster``.

    ``credentials`` has ``access_key``, ``secret_key`` and ``token`` (botocore ``Credentials`` or its frozen
    form).
    """
    from botocore.auth import SigV4QueryAuth  # type: ignore[import-untyped]
    from botocore.awsrequest import AWSRequest  # type: ignore[import-untyped]

    request = AWSRequest(
        method="GET",
        url=f"{sts_endpoint(region)}/",
        params={"Action": "GetCallerIdentity", "Version": STS_API_VERSION},
        headers={CLUSTER_ID_HEADER: cluster},
    )
    SigV4QueryAuth(credentials, "sts", region, expires=PRESIGN_EXPIRES_SECONDS).add_auth(request)
    return str(request.prepare().url)


def eks_token(cluster: str, region: str, credentials: Any) -> str:
    """A bearer token for EKS ``cluster``: ``k8s-aws-v1.`` + the presigned URL, base64url without padding."""
    url = presigned_caller_identity_url(cluster, region, credentials)
    return TOKEN_PREFIX + base64.urlsafe_b64encode(url.encode()).decode().rstrip("=")


def default_credentials() -> Any:
    """The default AWS credential chain (Lambda's role credentials from the environment)."""
    import botocore.session  # type: ignore[import-untyped]

    credentials = botocore.session.get_session().get_credentials()
    if credentials is None:
        raise RuntimeError("no AWS credentials found for EKS authentication")
    return credentials


class EksTokenSource:
    """EKS bearer tokens, regenerated once a token is ``refresh_after`` seconds old (or after a 401).

    ``credentials`` is botocore ``Credentials`` (refreshable ones are frozen per token), a boto3 session,
    or a callable returning credentials; by default the default credential chain. ``clock`` returns
    seconds (monotonic).
    """

    def __init__(
        self,
        cluster: str,
        region: str,
        credentials: Any = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        refresh_after: float = REFRESH_AFTER_SECONDS,
    ) -> None:
        self.cluster = cluster
        self.region = region
        self._credentials = credentials
        self._clock = clock
        self.refresh_after = refresh_after
        self._token: str | None = None
        self._made_at = 0.0
        self._lock = threading.Lock()

    def _resolve_credentials(self) -> Any:
        if self._credentials is None:
            self._credentials = default_credentials()
        source = self._credentials
        get_credentials = getattr(source, "get_credentials", None)  # a boto3/botocore session
        creds = get_credentials() if get_credentials else source() if callable(source) else source
        if creds is None:
            raise RuntimeError(f"no AWS credentials found to authenticate to EKS cluster {self.cluster}")
        # Refreshable credentials must be read as one consistent (key, secret, token) triple.
        freeze = getattr(creds, "get_frozen_credentials", None)
        return freeze() if freeze is not None else creds

    def token(self, refresh: bool = False) -> str:
        """The cached token, or a new one when it is due for renewal or ``refresh`` is set."""
        with self._lock:
            now = self._clock()
            if refresh or self._token is None or now - self._made_at >= self.refresh_after:
                self._token = eks_token(self.cluster, self.region, self._resolve_credentials())
                self._made_at = now
            return self._token


def describe_endpoint(eks_client: Any, cluster: str) -> tuple[str, str | None]:
    """The cluster's API endpoint and base64 CA bundle from ``eks:DescribeCluster`` (``eks_client``: boto3).

    For callers that have not described the cluster already; ``fleetwright.aws.cluster`` does it for the
    controllers, which pass its answer to :func:`cluster_config` instead of asking twice.
    """
    info = eks_client.describe_cluster(name=cluster)["cluster"]
    ca = (info.get("certificateAuthority") or {}).get("data")
    if not info.get("endpoint"):
        raise KubeConnectionError(f"EKS cluster {cluster} has no endpoint yet (status {info.get('status')})")
    return str(info["endpoint"]), str(ca) if ca else None


def cluster_config(
    cluster: str,
    region: str,
    *,
    endpoint: str,
    certificate_authority: str | None,
    credentials: Any = None,
) -> ClusterConfig:
    """``ClusterConfig`` for an EKS cluster: its endpoint, its CA (base64 PEM, as ``DescribeCluster``
    returns it) and EKS token authentication with ``credentials`` (see :class:`EksTokenSource`)."""
    if not endpoint:
        raise KubeConnectionError(f"EKS cluster {cluster} has no API endpoint")
    try:
        ca_data = base64.b64decode(certificate_authority, validate=True) if certificate_authority else None
    except (binascii.Error, ValueError) as err:
        raise KubeConnectionError(
            f"EKS cluster {cluster}: certificate authority is not base64: {err}"
        ) from err
    return ClusterConfig(
        server=str(endpoint).rstrip("/"),
        ca_data=ca_data,
        token=EksTokenSource(cluster, region, credentials),
    )
