"""Puts real resources on a fresh perpsim (manual clock) so the fuzzer reaches past 404s:
two funded customers, a trade between them (so a position and trade records exist) and a
resting order. Prints their identifiers as shell assignments for fuzz.sh.

    python seed.py <base url> <data dir>
"""

import sys
from pathlib import Path

import requests

from d2 import D2Signature

SYMBOL = "BTC-USDC-PERP"


def main(base_url: str, data_dir: Path) -> None:
    session = requests.Session()
    session.auth = D2Signature((data_dir / "demo-broker.key").read_bytes())
    token = (data_dir / "admin.token").read_text().strip()

    def call(method: str, path: str, body=None, expect: int = 200):
        r = session.request(method, f"{base_url}{path}", json=body)
        if r.status_code != expect:
            raise SystemExit(f"seed: {method} {path} answered {r.status_code}: {r.text}")
        return r.json()

    def funded(external_id: str) -> str:
        code = call("POST", "/v1/customers", {"external_id": external_id}, 201)["customer_code"]
        for asset in ("USDC", "USDT"):
            body = {"asset": asset, "amount": "1000000"}
            call("POST", f"/v1/customers/{code}/deposits", body, 201)
        return code

    def order(customer: str, reference: str, side: str, kind: str, price=None):
        body = {"symbol": SYMBOL, "side": side, "type": kind, "reference_id": reference}
        body["amount"] = "0.010"
        if price is not None:
            body["limit_price"] = price
        return call("POST", f"/v1/customers/{customer}/orders", body, 201)

    buyer, seller = funded("fuzz-buyer"), funded("fuzz-seller")
    r = requests.post(
        f"{base_url}/admin/v1/clock/advance",
        json={"seconds": 1},
        headers={"Authorization": f"Bearer {token}"},
    )
    r.raise_for_status()  # the transfer delay passes: the deposits complete
    order(seller, "fuzz-ask", "sell", "limit", "60000")
    order(buyer, "fuzz-take", "buy", "market")
    order(buyer, "fuzz-open", "buy", "limit", "50000")
    position = call("GET", f"/v1/customers/{buyer}/positions")[0]["position_code"]
    trade = call("GET", f"/v1/customers/{buyer}/trades")["data"][0]["code"]
    print(f"PERPSIM_CUSTOMER={buyer}")
    print("PERPSIM_REFERENCE=fuzz-open")
    print(f"PERPSIM_POSITION={position}")
    print(f"PERPSIM_TRADE={trade}")
    print(f"PERPSIM_SYMBOL={SYMBOL}")


if __name__ == "__main__":
    main(sys.argv[1].rstrip("/"), Path(sys.argv[2]))
