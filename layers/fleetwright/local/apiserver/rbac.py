"""RBAC for the emulator: bearer tokens name users in groups; ClusterRoles, Roles and their bindings decide
what each may do, as the real RBAC authorizer does; every resource request is recorded for audits.

A manifest such as ``docs/rbac.yaml`` is enforced only for the users it is given tokens for; the server's
own token (or no token at all) stays the administrator, so kubectl and test set-up keep full access.
"""

from __future__ import annotations

import secrets
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from fleetwright.local.apiserver.errors import ApiError

JsonObject = dict[str, Any]

ADMIN_NAME = "kubernetes-admin"
ADMIN_GROUPS = ("system:masters", "system:authenticated")


@dataclass(frozen=True)
class User:
    """An authenticated identity."""

    name: str
    groups: tuple[str, ...] = ()

    @property
    def admin(self) -> bool:
        """``system:masters`` bypasses authorization, as on a real API server."""
        return "system:masters" in self.groups


ADMIN = User(ADMIN_NAME, ADMIN_GROUPS)


@dataclass(frozen=True)
class Attributes:
    """What a resource request asks for, as the API server derives it from method, path and query."""

    verb: str
    group: str
    resource: str
    subresource: str = ""
    namespace: str = ""
    name: str = ""

    @property
    def full_resource(self) -> str:
        """``resource`` or ``resource/subresource``, the form RBAC rules name."""
        return f"{self.resource}/{self.subresource}" if self.subresource else self.resource


def request_verb(method: str, named: bool, watch: bool) -> str:
    """The RBAC verb of an HTTP request: GET is get, list or watch; DELETE on a collection is
    deletecollection."""
    if method in ("GET", "HEAD"):
        if watch:
            return "watch"
        return "get" if named else "list"
    if method == "DELETE":
        return "delete" if named else "deletecollection"
    return {"POST": "create", "PUT": "update", "PATCH": "patch"}.get(method, method.lower())


@dataclass(frozen=True)
class Rule:
    """One PolicyRule of a role."""

    api_groups: frozenset[str]
    resources: frozenset[str]
    verbs: frozenset[str]
    resource_names: frozenset[str]

    @classmethod
    def parse(cls, raw: JsonObject) -> Rule:
        def values(key: str) -> frozenset[str]:
            return frozenset(str(v) for v in raw.get(key) or [])

        return cls(values("apiGroups"), values("resources"), values("verbs"), values("resourceNames"))

    def allows(self, request: Attributes) -> bool:
        """RBAC's rule match: verb, API group, resource (``*``, ``res/sub`` or ``*/sub``), names."""
        if not ({"*", request.verb} & self.verbs):
            return False
        if not ({"*", request.group} & self.api_groups):
            return False
        candidates = {"*", request.full_resource}
        if request.subresource:
            candidates.add(f"*/{request.subresource}")
        if not (candidates & self.resources):
            return False
        return not self.resource_names or request.name in self.resource_names

    def grants(self) -> set[tuple[str, str, str]]:
        """(apiGroup, resource, verb) triples this rule names (wildcards kept as ``*``)."""
        return {(g, r, v) for g in self.api_groups for r in self.resources for v in self.verbs}


@dataclass(frozen=True)
class Binding:
    """A ClusterRoleBinding (namespace '') or RoleBinding: subjects get the rules of ``role``."""

    namespace: str
    role_kind: str
    role_name: str
    users: frozenset[str]
    groups: frozenset[str]

    def binds(self, user: User) -> bool:
        return user.name in self.users or bool(self.groups & set(user.groups))


@dataclass(frozen=True)
class Policy:
    """The roles and bindings of one or more manifests."""

    cluster_roles: dict[str, tuple[Rule, ...]]
    roles: dict[tuple[str, str], tuple[Rule, ...]]
    bindings: tuple[Binding, ...]

    @classmethod
    def load(cls, path: str | Path) -> Policy:
        """Read ClusterRole, ClusterRoleBinding, Role and RoleBinding documents (others are ignored)."""
        return cls.parse(yaml.safe_load_all(Path(path).read_text()))

    @classmethod
    def parse(cls, documents: Iterable[Any]) -> Policy:
        cluster_roles: dict[str, tuple[Rule, ...]] = {}
        roles: dict[tuple[str, str], tuple[Rule, ...]] = {}
        bindings: list[Binding] = []
        for doc in documents:
            if not isinstance(doc, dict):
                continue
            kind = doc.get("kind")
            meta = doc.get("metadata") or {}
            name = str(meta.get("name", ""))
            namespace = str(meta.get("namespace") or "default")
            if kind == "ClusterRole":
                cluster_roles[name] = tuple(Rule.parse(r) for r in doc.get("rules") or [])
            elif kind == "Role":
                roles[(namespace, name)] = tuple(Rule.parse(r) for r in doc.get("rules") or [])
            elif kind in ("ClusterRoleBinding", "RoleBinding"):
                bindings.append(_binding(doc, "" if kind == "ClusterRoleBinding" else namespace))
        return cls(cluster_roles, roles, tuple(bindings))

    def rules_for(self, user: User, namespace: str) -> list[Rule]:
        """The rules that apply to ``user`` for a request in ``namespace`` ('' = cluster scope)."""
        rules: list[Rule] = []
        for binding in self.bindings:
            if not binding.binds(user) or (binding.namespace and binding.namespace != namespace):
                continue
            if binding.role_kind == "ClusterRole":
                rules.extend(self.cluster_roles.get(binding.role_name, ()))
            elif binding.namespace:
                rules.extend(self.roles.get((binding.namespace, binding.role_name), ()))
        return rules

    def allows(self, user: User, request: Attributes) -> bool:
        return any(rule.allows(request) for rule in self.rules_for(user, request.namespace))


def _binding(doc: JsonObject, namespace: str) -> Binding:
    ref = doc.get("roleRef") or {}
    users: set[str] = set()
    groups: set[str] = set()
    for subject in doc.get("subjects") or []:
        kind, name = subject.get("kind"), str(subject.get("name", ""))
        if kind == "User":
            users.add(name)
        elif kind == "Group":
            groups.add(name)
        elif kind == "ServiceAccount":
            users.add(f"system:serviceaccount:{subject.get('namespace') or namespace}:{name}")
    return Binding(
        namespace, str(ref.get("kind", "")), str(ref.get("name", "")), frozenset(users), frozenset(groups)
    )


@dataclass(frozen=True)
class AuditRecord:
    """One resource request: who, what, and whether it was allowed."""

    user: User
    request: Attributes
    allowed: bool


@dataclass
class Authorizer:
    """Users by bearer token, the policy they are held to, and the audit log of their requests."""

    policy: Policy
    tokens: dict[str, User] = field(default_factory=dict)
    records: list[AuditRecord] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def add_user(self, name: str, groups: Iterable[str] = (), token: str | None = None) -> str:
        """Register a user (also in ``system:authenticated``); returns the bearer token that names it."""
        token = token or secrets.token_hex(16)
        self.tokens[token] = User(name, (*groups, "system:authenticated"))
        return token

    def user_for(self, token: str) -> User | None:
        return self.tokens.get(token)

    def check(self, user: User, request: Attributes) -> None:
        """Record the request; raise the API server's 403 when ``user`` may not make it."""
        allowed = user.admin or self.policy.allows(user, request)
        with self._lock:
            self.records.append(AuditRecord(user, request, allowed))
        if not allowed:
            raise forbidden(user, request)

    def audit(self, user: str | None = None, group: str | None = None) -> list[AuditRecord]:
        """The records of requests by user name and/or group member (all when neither is given)."""
        with self._lock:
            records = list(self.records)
        return [
            r
            for r in records
            if (user is None or r.user.name == user) and (group is None or group in r.user.groups)
        ]

    def used(self, user: str | None = None, group: str | None = None) -> set[tuple[str, str, str]]:
        """(apiGroup, resource[/subresource], verb) of every request recorded for the user or group."""
        return {(r.request.group, r.request.full_resource, r.request.verb) for r in self.audit(user, group)}

    def refused(self, user: str | None = None, group: str | None = None) -> list[AuditRecord]:
        return [r for r in self.audit(user, group) if not r.allowed]


def forbidden(user: User, request: Attributes) -> ApiError:
    """The 403 Status the real API server sends when the authorizer says no."""
    scope = f'in the namespace "{request.namespace}"' if request.namespace else "at the cluster scope"
    why = (
        f'User "{user.name}" cannot {request.verb} resource "{request.full_resource}" '
        f'in API group "{request.group}" {scope}'
    )
    qualified = f"{request.resource}.{request.group}" if request.group else request.resource
    subject = f'{qualified} "{request.name}"' if request.name else qualified
    details: JsonObject = {"kind": request.resource}
    if request.name:
        details["name"] = request.name
    if request.group:
        details["group"] = request.group
    return ApiError(403, "Forbidden", f"{subject} is forbidden: {why}", details)
