"""Smoke test of the Python client generated from openapi/broker.json, against the real
binary on loopback (manual clock): customers, money, orders, positions, pages and errors.

Usage: smoke.py BASE_URL DATA_DIR
"""

import sys
from pathlib import Path

import httpx
from perpsim_client.api.customers import (
    create_customer,
    create_deposit,
    list_balances,
    list_transactions,
)
from perpsim_client.api.orders import (
    amend_order,
    cancel_order,
    create_order,
    get_order,
    list_open_orders,
    list_positions,
)
from perpsim_client.models import (
    AmendRequest,
    CreateCustomerRequest,
    CustomerRecord,
    ErrorBody,
    OrderEntryType,
    OrderRequest,
    Side,
    TransferRequest,
    TransferRequestAsset,
)

from signing import signed_client

BTC = "BTC-USDC-PERP"


def check(condition, what):
    if not condition:
        raise AssertionError(what)
    print(f"ok   {what}")


def main(base_url: str, data_dir: Path) -> None:
    client = signed_client(base_url, (data_dir / "demo-broker.key").read_bytes())
    token = (data_dir / "admin.token").read_text().strip()

    def advance(seconds: int) -> None:
        r = httpx.post(
            f"{base_url}/admin/v1/clock/advance",
            json={"seconds": seconds},
            headers={"Authorization": f"Bearer {token}"},
        )
        r.raise_for_status()

    def funded(external_id: str) -> str:
        customer = create_customer.sync(
            client=client, body=CreateCustomerRequest(external_id=external_id)
        )
        check(isinstance(customer, CustomerRecord), f"customer {external_id} created")
        deposit = create_deposit.sync(
            customer.customer_code,
            client=client,
            body=TransferRequest(asset=TransferRequestAsset.USDC, amount="100000"),
        )
        check(deposit.status == "pending", "a deposit answers pending")
        return customer.customer_code

    a, b = funded("sdk-py-a"), funded("sdk-py-b")
    advance(1)  # the manual clock reaches the transfer delay: deposits complete
    balances = list_balances.sync(a, client=client)
    check(balances[0].total == "100000.0000000000", "the deposit completed on the clock")

    placed = create_order.sync(
        a,
        client=client,
        body=OrderRequest(
            symbol=BTC,
            side=Side.BUY,
            type_=OrderEntryType.LIMIT,
            reference_id="py-1",
            amount="0.010",
            limit_price="50000",
        ),
    )
    check(placed.status == "open" and placed.expire_time is None, "order open, expire_time null")
    amended = amend_order.sync(
        a, "py-1", client=client, body=AmendRequest(limit_price="50100")
    )
    check(amended.limit_price == "50100.0", "order amended")
    open_orders = list_open_orders.sync(a, client=client)
    check([o.reference_id for o in open_orders.data] == ["py-1"], "open orders listed")
    canceled = cancel_order.sync(a, "py-1", client=client)
    check(canceled.status == "canceled", "order canceled")

    create_order.sync(
        b,
        client=client,
        body=OrderRequest(
            symbol=BTC,
            side=Side.SELL,
            type_=OrderEntryType.LIMIT,
            reference_id="py-ask",
            amount="0.010",
            limit_price="60000",
        ),
    )
    taken = create_order.sync(
        a,
        client=client,
        body=OrderRequest(
            symbol=BTC,
            side=Side.BUY,
            type_=OrderEntryType.MARKET,
            reference_id="py-take",
            amount="0.010",
        ),
    )
    check(taken.status == "filled" and taken.avg_fill_price == "60000.0", "market order filled")
    positions = list_positions.sync(a, client=client)
    check(len(positions) == 1 and positions[0].side == "long", "a long position")

    first = list_transactions.sync(client=client, customer_code=a, limit=1)
    check(first.response_metadata.has_next, "first page of transactions, more after it")
    second = list_transactions.sync(
        client=client,
        customer_code=a,
        limit=1,
        after=first.response_metadata.end_cursor,
    )
    check(
        second.data[0].code != first.data[0].code and second.response_metadata.has_previous,
        "second page through the cursor",
    )

    missing = get_order.sync_detailed(a, "nope", client=client)
    check(
        missing.status_code == 404
        and isinstance(missing.parsed, ErrorBody)
        and missing.parsed.code == "NOT_FOUND",
        "a 404 decoded into ErrorBody",
    )
    print("python sdk smoke: 1 passed, 0 failed")


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]))
