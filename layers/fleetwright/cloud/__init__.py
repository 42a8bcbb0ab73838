"""The cloud provider contract every capability works against: one
:class:`~fleetwright.cloud.provider.CloudProvider` protocol (with the narrower views each capability types
against), the typed results it returns (:mod:`~fleetwright.cloud.instances`, :mod:`~fleetwright.cloud.launch`)
and the errors it raises (:mod:`~fleetwright.cloud.errors`). ``fleetwright.aws.provider.AwsProvider``
implements it; capabilities never import ``fleetwright.aws`` to reach the cloud (docs/aws.md, "The cloud
provider contract")."""
