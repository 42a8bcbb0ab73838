"""The cloud provider contract every capability works against: one
:class:`~fleetwright.cloud.provider.CloudProvider` protocol (with the narrower views each capability types
against), the typed results it returns (:mod:`~fleetwright.cloud.instances`, :mod:`~fleetwright.cloud.launch`,
:mod:`~fleetwright.cloud.nodeclass`), the launch deadline its callers scope their calls with
(:mod:`~fleetwright.cloud.deadline`) and the errors it raises (:mod:`~fleetwright.cloud.errors`).
``fleetwright.aws.provider.AwsProvider`` implements it; the capabilities and ``fleetwright.claims`` never
import ``fleetwright.aws`` (an import-linter ``forbidden`` contract; docs/aws.md, "The cloud provider
contract")."""
