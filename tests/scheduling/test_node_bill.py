"""The scheduler weighs each node's whole bill (fleetwright.catalog.bill): volumes and a public IPv4 address
per node, and on burstable types the CPU credits of the pods' requests above the baseline."""

from __future__ import annotations

import pytest

from fleetwright.catalog.bill import DEFAULT_VIEW, NodeClassView, Volume
from fleetwright.model.labels import CAPACITY_TYPE
from fleetwright.scheduling.costs import unit_cost
from fleetwright.scheduling.packing import Option, cheapest_price, undominated
from fleetwright.scheduling.scheduler import schedule
from fleetwright.scheduling.types import NodePoolTemplate, Results, SchedulingInput
from tests.scheduling.builders import itype, nodepool, pod, req

ROOT = 20 * 0.08 / 730  # a 20 GiB gp3 root volume, $/h
# t3.large: 2 vCPUs at a 30 % baseline (600m), surplus credits $0.05 per vCPU-hour; m5.large 13 % dearer.
TYPES = [itype("t3.large", "2", "8Gi", price=0.0832), itype("m5.large", "2", "8Gi", price=0.096)]


def pool(bill: NodeClassView = DEFAULT_VIEW) -> NodePoolTemplate:
    template = nodepool(requirements=req(CAPACITY_TYPE, "In", "on-demand"))
    template.bill = bill
    return template


def run(cpu: str, count: int = 1, bill: NodeClassView = DEFAULT_VIEW) -> Results:
    pods = [pod(f"p-{i}", cpu=cpu, memory="1Gi") for i in range(count)]
    return schedule(SchedulingInput(pods, [pool(bill)], TYPES))


def test_a_burstable_type_whose_baseline_covers_the_pods_is_chosen_at_its_price() -> None:
    result = run("500m")
    [claim] = result.new_claims
    assert [t.name for t in claim.instance_types] == ["t3.large", "m5.large"]
    assert claim.bill.credits == 0.0 and claim.bill.total == pytest.approx(0.0832 + ROOT)


def test_a_burstable_type_whose_credits_cost_more_is_neither_chosen_nor_a_candidate() -> None:
    # 1500m on a t3.large: 0.9 vCPU-hour of surplus an hour, $0.045 on top of $0.0832 > $0.096.
    result = run("1500m")
    [claim] = result.new_claims
    assert [t.name for t in claim.instance_types] == ["m5.large"]
    assert claim.price == 0.096 and claim.bill.credits == 0.0
    assert result.bill.total == pytest.approx(0.096 + ROOT)


def test_the_node_class_view_prices_volumes_and_address_per_node() -> None:
    view = NodeClassView(volumes=(Volume("gp3", 4), Volume("gp3", 100, iops=6000)), public_ipv4=True)
    result = run("500m", count=3, bill=view)
    volumes = (104 * 0.08 + 3000 * 0.005) / 730
    assert result.new_claims
    assert all(c.bill.volumes == pytest.approx(volumes) for c in result.new_claims)
    assert all(c.bill.address == 0.005 for c in result.new_claims)
    n = len(result.new_claims)
    assert result.bill.total == pytest.approx(sum(c.price for c in result.new_claims) + n * (volumes + 0.005))


def test_dearer_per_node_costs_pack_fewer_larger_nodes() -> None:
    # Two 1.2-CPU pods need two 2-vCPU nodes or one 4-vCPU node (here $0.20/h, more than two m5.large).
    # With a 20 GiB root volume each, two m5.large cost less; with a $0.106/h io1 volume and a public
    # address on every node, one node does.
    types = [*TYPES, itype("m5.xlarge", "4", "16Gi", price=0.2)]
    pods = [pod(f"p-{i}", cpu="1200m", memory="1Gi") for i in range(2)]
    cheap = schedule(SchedulingInput(pods, [pool()], types))
    assert sorted(c.instance_types[0].name for c in cheap.new_claims) == ["m5.large", "m5.large"]
    view = NodeClassView(volumes=(Volume("io1", 100, iops=1000),), public_ipv4=True)
    dear = schedule(SchedulingInput(pods, [pool(view)], types))
    assert [c.instance_types[0].name for c in dear.new_claims] == ["m5.xlarge"]


def test_unit_cost_counts_credits_for_the_mix_above_the_baseline() -> None:
    # 2000m of room holds 4 copies of (500m, 1 GiB): 2000m requested, 600m covered, 1.4 vCPU-hours.
    mix = (500, 2**30, 1)
    cost = unit_cost(0.0832, (2000, 8 * 2**30, 110), mix, extra=ROOT, terms=(600.0, 0.05 / 1000))
    assert cost == pytest.approx((0.0832 + ROOT + 1.4 * 0.05) / 4)
    # A memory-bound mix uses little CPU: 2 copies of (250m, 4 GiB) stay under the baseline.
    memory_bound = unit_cost(0.0832, (2000, 8 * 2**30, 110), (250, 4 * 2**30, 1), ROOT, (600.0, 0.05 / 1000))
    assert memory_bound == pytest.approx((0.0832 + ROOT) / 2)
    assert unit_cost(0.096, (2000, 8 * 2**30, 110), mix, extra=ROOT) == pytest.approx((0.096 + ROOT) / 4)


def test_repacking_options_price_burstable_nodes_by_what_they_hold() -> None:
    burstable = Option((2000, 8 * 2**30, 110), 0.0832 + ROOT + 1.4 * 0.05, 0, (600.0, 0.05 / 1000))
    plain = Option((2000, 8 * 2**30, 110), 0.096 + ROOT, 1)
    assert burstable.cost((500, 0, 1)) == pytest.approx(0.0832 + ROOT)
    assert burstable.cost((2000, 0, 1)) == pytest.approx(burstable.price)
    options = undominated([burstable, plain])
    assert options == [plain, burstable]  # priced full it is dearer, idle it is cheaper: both kept
    assert cheapest_price((500, 0, 1), options) == pytest.approx(0.0832 + ROOT)
    assert cheapest_price((1500, 0, 1), options) == pytest.approx(0.096 + ROOT)
