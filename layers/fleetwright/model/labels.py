"""Well-known node labels and taints (Kubernetes, Karpenter and the AWS provider)."""

from __future__ import annotations

ZONE = "topology.kubernetes.io/zone"
REGION = "topology.kubernetes.io/region"
INSTANCE_TYPE = "node.kubernetes.io/instance-type"
ARCH = "kubernetes.io/arch"
OS = "kubernetes.io/os"
HOSTNAME = "kubernetes.io/hostname"
CAPACITY_TYPE = "karpenter.sh/capacity-type"
NODEPOOL = "karpenter.sh/nodepool"
WINDOWS_BUILD = "node.kubernetes.io/windows-build"
ZONE_ID = "topology.k8s.aws/zone-id"  # the zone's account-independent id (use1-az1), from the offering

ON_DEMAND = "on-demand"
SPOT = "spot"
RESERVED = "reserved"
CAPACITY_TYPES = (SPOT, ON_DEMAND, RESERVED)

AWS_PREFIX = "karpenter.k8s.aws/"
INSTANCE_CATEGORY = AWS_PREFIX + "instance-category"
INSTANCE_FAMILY = AWS_PREFIX + "instance-family"
INSTANCE_GENERATION = AWS_PREFIX + "instance-generation"
INSTANCE_SIZE = AWS_PREFIX + "instance-size"
INSTANCE_CPU = AWS_PREFIX + "instance-cpu"
INSTANCE_CPU_MANUFACTURER = AWS_PREFIX + "instance-cpu-manufacturer"
INSTANCE_MEMORY = AWS_PREFIX + "instance-memory"
INSTANCE_HYPERVISOR = AWS_PREFIX + "instance-hypervisor"
INSTANCE_NETWORK_BANDWIDTH = AWS_PREFIX + "instance-network-bandwidth"
INSTANCE_GPU_COUNT = AWS_PREFIX + "instance-gpu-count"
INSTANCE_GPU_NAME = AWS_PREFIX + "instance-gpu-name"
INSTANCE_GPU_MANUFACTURER = AWS_PREFIX + "instance-gpu-manufacturer"
INSTANCE_GPU_MEMORY = AWS_PREFIX + "instance-gpu-memory"
INSTANCE_ACCELERATOR_NAME = AWS_PREFIX + "instance-accelerator-name"
INSTANCE_ACCELERATOR_MANUFACTURER = AWS_PREFIX + "instance-accelerator-manufacturer"
INSTANCE_ACCELERATOR_COUNT = AWS_PREFIX + "instance-accelerator-count"
INSTANCE_LOCAL_NVME = AWS_PREFIX + "instance-local-nvme"
INSTANCE_EBS_BANDWIDTH = AWS_PREFIX + "instance-ebs-bandwidth"
INSTANCE_CPU_SUSTAINED_CLOCK_SPEED_MHZ = AWS_PREFIX + "instance-cpu-sustained-clock-speed-mhz"
INSTANCE_ENCRYPTION_IN_TRANSIT_SUPPORTED = AWS_PREFIX + "instance-encryption-in-transit-supported"
INSTANCE_CAPABILITY_FLEX = AWS_PREFIX + "instance-capability-flex"
NITRO_SANDBOX = AWS_PREFIX + "nitro-sandbox"  # Nitro Enclaves supported ("true"/"false")

# Labels whose value comes from the instance type or the offering chosen at launch: a NodePool need not
# mention them for a pod to select them (Karpenter's "well-known labels").
WELL_KNOWN_LABELS = frozenset(
    {
        ZONE,
        ZONE_ID,
        REGION,
        INSTANCE_TYPE,
        ARCH,
        OS,
        CAPACITY_TYPE,
        NODEPOOL,
        WINDOWS_BUILD,
        INSTANCE_CATEGORY,
        INSTANCE_FAMILY,
        INSTANCE_GENERATION,
        INSTANCE_SIZE,
        INSTANCE_CPU,
        INSTANCE_CPU_MANUFACTURER,
        INSTANCE_MEMORY,
        INSTANCE_HYPERVISOR,
        INSTANCE_NETWORK_BANDWIDTH,
        INSTANCE_GPU_COUNT,
        INSTANCE_GPU_NAME,
        INSTANCE_GPU_MANUFACTURER,
        INSTANCE_GPU_MEMORY,
        INSTANCE_ACCELERATOR_NAME,
        INSTANCE_ACCELERATOR_MANUFACTURER,
        INSTANCE_ACCELERATOR_COUNT,
        INSTANCE_LOCAL_NVME,
        INSTANCE_EBS_BANDWIDTH,
        INSTANCE_CPU_SUSTAINED_CLOCK_SPEED_MHZ,
        INSTANCE_ENCRYPTION_IN_TRANSIT_SUPPORTED,
        INSTANCE_CAPABILITY_FLEX,
        NITRO_SANDBOX,
    }
)

INSTANCE_TENANCY = AWS_PREFIX + "instance-tenancy"
CAPACITY_RESERVATION_TYPE = AWS_PREFIX + "capacity-reservation-type"
CAPACITY_RESERVATION_ID = AWS_PREFIX + "capacity-reservation-id"
CAPACITY_RESERVATION_INTERRUPTIBLE = AWS_PREFIX + "capacity-reservation-interruptible"
PLACEMENT_GROUP_ID = AWS_PREFIX + "placement-group-id"
PLACEMENT_GROUP_PARTITION = AWS_PREFIX + "placement-group-partition"
TENANCIES = ("default", "dedicated")

# Labels the launch decides from the EC2NodeClass and the claim's requirements (tenancy, placement group):
# every NodePool's requirements carry them (see fleetwright.scheduling.templates), so pods may select them.
LAUNCH_DECIDED_LABELS = frozenset({INSTANCE_TENANCY, PLACEMENT_GROUP_ID, PLACEMENT_GROUP_PARTITION})

# Labels a reserved offering (one capacity reservation) decides; nodes of other capacity types lack them.
CAPACITY_RESERVATION_LABELS = frozenset(
    {CAPACITY_RESERVATION_ID, CAPACITY_RESERVATION_TYPE, CAPACITY_RESERVATION_INTERRUPTIBLE}
)
WELL_KNOWN_LABELS = WELL_KNOWN_LABELS | CAPACITY_RESERVATION_LABELS


# Well-known labels an instance type itself decides (a type without one of these lacks that label).
# The OS and Windows build are set per EC2NodeClass AMI family (fleetwright.catalog.os_family).
INSTANCE_TYPE_LABELS = (
    WELL_KNOWN_LABELS - {ZONE, ZONE_ID, CAPACITY_TYPE, REGION, NODEPOOL} - CAPACITY_RESERVATION_LABELS
)

# Labels that only an offering (not the instance type itself) decides.
OFFERING_LABELS = frozenset({ZONE, ZONE_ID, CAPACITY_TYPE}) | CAPACITY_RESERVATION_LABELS

# Labels inside Karpenter's restricted domains that users may set.
ALLOWED_RESTRICTED_LABELS = frozenset(
    {ZONE, REGION, INSTANCE_TYPE, ARCH, OS, CAPACITY_TYPE, WINDOWS_BUILD, HOSTNAME}
)

DISRUPTED_TAINT_KEY = "karpenter.sh/disrupted"
UNREGISTERED_TAINT_KEY = "karpenter.sh/unregistered"
DO_NOT_DISRUPT_ANNOTATION = "karpenter.sh/do-not-disrupt"
MIRROR_POD_ANNOTATION = "kubernetes.io/config.mirror"  # static pods the kubelet mirrors into the API
