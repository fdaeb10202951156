"""What a job's author may ask of the pods the operator makes: no more than a pod's author.

The operator creates the driver pod, and Spark (as the driver's ServiceAccount) the executors, from what the
job says: its podTemplates and sparkConf. Unchecked, whoever may create a FaultTolerantSparkJob could ask for
the node's network or filesystem, another ServiceAccount, or the operator's own labels. The rules below refuse
each such field unless an admin granted its allowance, for the installation (the operator's --allow) or for a
namespace (the label allow.ftspark.io/<allowance>=true). What the operator itself relies on (its labels,
Spark's bookkeeping labels, ways around the executor template) is never allowed. docs/security-policy.md
lists them for admins.

The rules are data: `violations` checks a spec against them, and ftspark.admission compiles the same rules to
the CEL of the chart's ValidatingAdmissionPolicy, so that the API server refuses the same fields at apply
time. Only what the user writes is checked: what the operator adds (localRecovery's volume of its
default directory, the driver's ServiceAccount) is not the user's.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, assert_never, get_args

from ftspark import API_GROUP
from ftspark.domain.models import JobSpec, LocalRecoverySpec
from ftspark.domain.recovery import as_s3
from ftspark.protocol import SPARK_APP_SELECTOR_LABEL, SPARK_EXEC_ID_LABEL, SPARK_ROLE_LABEL, DriverEnv

Allowance = Literal[
    "serviceAccount",
    "hostNetwork",
    "hostPID",
    "hostIPC",
    "privileged",
    "capabilities",
    "hostPath",
    "nodeName",
    "tolerations",
]
ALLOWANCES: tuple[Allowance, ...] = get_args(Allowance)
# Namespace labels an admin sets to grant one allowance there; CEL reads namespaceObject.metadata.labels too.
NAMESPACE_LABEL_PREFIX = "allow.ftspark.io/"
# Where a job keeps its state is where the operator's own S3 credentials read, write job-graph payloads and
# dispose of savepoints for it: an admin may bound checkpoint.storage to prefixes, for the installation
# (--storage-prefixes) and, beyond those, for one namespace (this annotation, comma-separated s3:// prefixes).
STORAGE_PREFIXES_ANNOTATION = "ftspark.io/storage-prefixes"


@dataclass(frozen=True)
class Present:
    """The field is set, to anything."""


@dataclass(frozen=True)
class IsTrue:
    """The field is the boolean true."""


@dataclass(frozen=True)
class NonEmpty:
    """The field is a non-empty list (or map, or string)."""


@dataclass(frozen=True)
class KeyMatches:
    """The field is a map with a key matching the pattern (a regular expression both Python's re and RE2 read
    alike; searched, not anchored, unless it says ^ or $) and not matching `unless` (RE2 has no lookahead)."""

    pattern: str
    unless: str = ""

    def matches(self, key: str) -> bool:
        return re.search(self.pattern, key) is not None and not (self.unless and re.search(self.unless, key))


@dataclass(frozen=True)
class Matches:
    """The field is a string matching the pattern (read as KeyMatches reads its)."""

    pattern: str


@dataclass(frozen=True)
class LiteralNamed:
    """The field is an environment variable with a literal value whose name matches the pattern."""

    pattern: str


@dataclass(frozen=True)
class ToleratesAll:
    """The field is a toleration that tolerates every taint: operator Exists without a key."""


@dataclass(frozen=True)
class Differs:
    """The field is set to something else than this value."""

    value: str


Test = Present | IsTrue | NonEmpty | KeyMatches | Matches | LiteralNamed | ToleratesAll | Differs


@dataclass(frozen=True)
class Rule:
    """field: a path under spec in the resource's own spelling; `name[]` stands for each element of a list."""

    field: str
    test: Test
    allowance: Allowance | None  # None: never allowed
    why: str
    remedy: str = ""  # for a rule never allowed: what to do instead

    def message(self, field: str) -> str:
        """What the user is told, the field named as they wrote it (or with [*] for any element)."""
        if self.allowance is None:
            return f"{field}: {self.why}; {self.remedy or 'ftspark sets or relies on it, so a job may not'}"
        return (
            f"{field}: {self.why}; needs the allowance {self.allowance} "
            f"(namespace label {NAMESPACE_LABEL_PREFIX}{self.allowance}=true, or the operator's --allow)"
        )


# Labels and annotations ftspark and Spark find their pods by: another job would adopt a pod carrying them.
_OWN = re.escape(f"{API_GROUP}/")
_RESERVED_LABEL = f"({_OWN}.*|{SPARK_APP_SELECTOR_LABEL}|{SPARK_ROLE_LABEL}|{SPARK_EXEC_ID_LABEL})"
_CONTAINER_LISTS = ("containers", "initContainers", "ephemeralContainers")
# The driver's environment from the operator (its attempt, fencing, Spark settings): a job's value would come
# last and win, past fencing and the sparkConf rules. The local recovery jar's path is the job's to change.
_DRIVER_ENV = "^(" + "|".join(sorted(e.value for e in DriverEnv if e != DriverEnv.LOCAL_RECOVERY_JAR)) + ")$"
_DRIVER_ENV_WHY = "a variable the operator sets for the driver"
# Secrets in plain text: the operator would copy them into the driver pod's environment and the job graph
# (readable by whoever may read ConfigMaps or pods there). Spark's own redaction pattern for keys; the
# settings that name Secrets to mount (spark.kubernetes.*.secrets.*, *.secretKeyRef.*) are not secrets.
_SECRET_CONF = KeyMatches(
    r"(?i)(password|token|access\.?key|secret)", unless=r"^spark\.kubernetes\.(driver|executor)\.secret"
)
_SECRET_ENV = r"(?i)(password|secret|token|access_?key|api_?key)"
_SECRET_WHY = "a secret in plain text, which would be copied into the driver pod and the job's records"
_SECRET_REMEDY = "put it in a Secret and pass it with spec.env[].secretKeyRef (AWS_* for S3)"


def _pod_rules(role: Literal["driver", "executor"]) -> list[Rule]:
    pod = f"{role}.podTemplate"
    containers = [f"{pod}.spec.{kind}[]" for kind in _CONTAINER_LISTS]
    return [
        Rule(
            f"{pod}.metadata.labels",
            KeyMatches(f"^{_RESERVED_LABEL}$"),
            None,
            "a label ftspark or Spark selects by",
        ),
        Rule(f"{pod}.metadata.annotations", KeyMatches(f"^{_OWN}"), None, "an ftspark annotation"),
        Rule(f"{pod}.spec.serviceAccountName", Present(), "serviceAccount", "another ServiceAccount"),
        Rule(f"{pod}.spec.serviceAccount", Present(), "serviceAccount", "another ServiceAccount"),
        Rule(
            f"{pod}.spec.automountServiceAccountToken",
            IsTrue(),
            "serviceAccount",
            "the ServiceAccount's token in every container",
        ),
        Rule(f"{pod}.spec.hostNetwork", IsTrue(), "hostNetwork", "the node's network"),
        Rule(f"{pod}.spec.hostPID", IsTrue(), "hostPID", "the node's processes"),
        Rule(f"{pod}.spec.hostIPC", IsTrue(), "hostIPC", "the node's IPC"),
        Rule(f"{pod}.spec.nodeName", Present(), "nodeName", "a node chosen past the scheduler"),
        Rule(f"{pod}.spec.tolerations[]", ToleratesAll(), "tolerations", "a toleration of every taint"),
        Rule(f"{pod}.spec.volumes[].hostPath", Present(), "hostPath", "a directory of the node"),
        *(
            rule
            for each in containers
            for rule in (
                Rule(f"{each}.securityContext.privileged", IsTrue(), "privileged", "a privileged container"),
                Rule(
                    f"{each}.securityContext.allowPrivilegeEscalation",
                    IsTrue(),
                    "privileged",
                    "privilege escalation",
                ),
                Rule(
                    f"{each}.securityContext.capabilities.add",
                    NonEmpty(),
                    "capabilities",
                    "added capabilities",
                ),
                Rule(f"{each}.ports[].hostPort", Present(), "hostNetwork", "a port of the node"),
                Rule(f"{each}.env[].name", Matches(_DRIVER_ENV), None, _DRIVER_ENV_WHY),
                Rule(f"{each}.env[]", LiteralNamed(_SECRET_ENV), None, _SECRET_WHY, _SECRET_REMEDY),
            )
        ),
    ]


RULES: tuple[Rule, ...] = (
    *_pod_rules("driver"),
    *_pod_rules("executor"),
    Rule("env[].name", Matches(_DRIVER_ENV), None, _DRIVER_ENV_WHY),
    Rule("env[]", LiteralNamed(_SECRET_ENV), None, _SECRET_WHY, _SECRET_REMEDY),
    Rule("sparkConf", _SECRET_CONF, None, _SECRET_WHY, _SECRET_REMEDY),
    # Spark builds the executors from its own settings as well as from the template.
    Rule(
        "sparkConf",
        KeyMatches(r"^spark\.kubernetes\.authenticate\."),
        "serviceAccount",
        "a ServiceAccount or credentials for Spark",
    ),
    Rule(
        "sparkConf",
        KeyMatches(r"^spark\.authenticate(\.|$)"),
        None,
        "Spark RPC authentication, which the operator turns on with a new key for every attempt",
    ),
    Rule(
        "sparkConf",
        KeyMatches(r"^spark\.kubernetes\.(driver|executor)\.volumes\.hostPath\."),
        "hostPath",
        "a directory of the node",
    ),
    Rule(
        "sparkConf",
        KeyMatches(rf"^spark\.kubernetes\.(driver|executor)\.(label\.{_RESERVED_LABEL}$|annotation\.{_OWN})"),
        None,
        "a label or annotation ftspark or Spark selects by",
    ),
    Rule(
        "sparkConf",
        KeyMatches(r"^spark\.kubernetes\.(driver|executor)\.(podTemplateFile|pod\.featureSteps)$"),
        None,
        "a pod template or code from the image, past the operator's template and every check here",
    ),
    Rule(
        "localRecovery.hostPath",
        Differs(LocalRecoverySpec().host_path),
        "hostPath",
        "a directory of the node other than localRecovery's default",
    ),
)


@dataclass(frozen=True)
class Violation:
    field: str  # as the user wrote it: spec.driver.podTemplate.spec.hostNetwork, spec.sparkConf["k"]
    rule: Rule

    @property
    def message(self) -> str:
        return self.rule.message(self.field)


def namespace_allowances(labels: Mapping[str, str]) -> frozenset[str]:
    """The allowances a namespace's labels grant (label value "true")."""
    return frozenset(
        key.removeprefix(NAMESPACE_LABEL_PREFIX)
        for key, value in labels.items()
        if key.startswith(NAMESPACE_LABEL_PREFIX) and value == "true"
    )


def violations(spec: JobSpec, allowed: Collection[str] = ()) -> list[Violation]:
    """Every field of the spec that needs an allowance not in `allowed`, or that no allowance permits."""
    document = spec.model_dump(mode="json", by_alias=True)
    return [
        Violation(field, rule)
        for rule in RULES
        if rule.allowance is None or rule.allowance not in allowed
        for field in _offending(document, rule.field.split("."), rule.test, "spec")
    ]


def _offending(node: Any, parts: list[str], test: Test, at: str) -> Iterator[str]:
    """The paths under `at` where the rule's field is set and fails its test."""
    if not parts:
        yield from _failing(node, test, at)
        return
    head, *rest = parts
    name = head.removesuffix("[]")
    if not isinstance(node, dict) or name not in node:
        return
    value, here = node[name], f"{at}.{name}"
    if head.endswith("[]"):
        for index, item in enumerate(value if isinstance(value, list) else []):
            yield from _offending(item, rest, test, f"{here}[{index}]")
    else:
        yield from _offending(value, rest, test, here)


def _failing(value: Any, test: Test, at: str) -> Iterator[str]:
    if isinstance(test, KeyMatches):  # a map: each offending key is named
        if isinstance(value, dict):
            yield from (f'{at}["{key}"]' for key in value if test.matches(key))
    elif _fails(value, test):
        yield at


def _fails(
    value: Any, test: Present | IsTrue | NonEmpty | Matches | LiteralNamed | ToleratesAll | Differs
) -> bool:
    match test:
        case Present():
            return True
        case IsTrue():
            return value is True
        case NonEmpty():
            return isinstance(value, list | dict | str) and len(value) > 0
        case Matches(pattern=pattern):
            return isinstance(value, str) and re.search(pattern, value) is not None
        case LiteralNamed(pattern=pattern):
            return (
                isinstance(value, dict)
                and re.search(pattern, str(value.get("name", ""))) is not None
                and bool(value.get("value"))
            )
        case ToleratesAll():
            return (
                isinstance(value, dict) and value.get("operator") == "Exists" and value.get("key", "") == ""
            )
        case Differs(value=expected):
            return bool(value != expected)
        case _:
            assert_never(test)


def storage_prefixes(annotations: Mapping[str, str]) -> tuple[str, ...]:
    """The storage prefixes a namespace's annotation grants."""
    named = annotations.get(STORAGE_PREFIXES_ANNOTATION, "")
    return tuple(prefix.strip() for prefix in named.split(",") if prefix.strip())


# The one field the storage prefixes bound (its spelling under spec).
STORAGE_FIELD = "checkpoint.storage"


def storage_root(uri: str) -> str:
    """A storage URI or prefix as prefixes are compared: s3a:// written s3://, without trailing slashes."""
    return as_s3(uri).rstrip("/")


def storage_within(storage: str, prefixes: Collection[str]) -> bool:
    """Whether the storage is under one of the prefixes: the prefix itself, or below it at a path segment
    (s3://b/team does not hold s3://b/team-x). No prefix: anywhere. ftspark.admission says it in CEL."""
    root = storage_root(storage)
    roots = [storage_root(prefix) for prefix in prefixes]
    return not roots or any(root == each or root.startswith(f"{each}/") for each in roots)


def storage_message(storage: str, prefixes: str) -> str:
    """What the user is told of a storage outside `prefixes` (the allowed ones, as listed to them)."""
    return (
        f"spec.{STORAGE_FIELD}: {storage} is outside the storage this namespace may use ({prefixes}; "
        f"an admin grants more with the namespace annotation {STORAGE_PREFIXES_ANNOTATION})"
    )


def outside_storage(spec: JobSpec, prefixes: Sequence[str]) -> str:
    """Why the job's checkpoint.storage is outside every prefix (listed in their order: the installation's,
    then the namespace's); empty when it is inside one, or when no prefix is set (no limit)."""
    if storage_within(spec.checkpoint.storage, prefixes):
        return ""
    return storage_message(spec.checkpoint.storage, ", ".join(prefixes))
