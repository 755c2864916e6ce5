"""Puts real resources on a fresh perpsim so the admin fuzzer reaches past 404s: the demo
broker's code, a customer and a pending deposit of it. Prints their identifiers as shell
assignments for fuzz_admin.sh.

    python seed_admin.py <base url> <data dir>
"""

import sys
from pathlib import Path

import requests

from d2 import D2Signature


def main(base_url: str, data_dir: Path) -> None:
    session = requests.Session()
    session.auth = D2Signature((data_dir / "demo-broker.key").read_bytes())

    def call(method: str, path: str, body=None, expect: int = 200):
        r = session.request(method, f"{base_url}{path}", json=body)
        if r.status_code != expect:
            raise SystemExit(f"seed: {method} {path} answered {r.status_code}: {r.text}")
        return r.json()

    customer = call("POST", "/v1/customers", {"external_id": "fuzz-admin"}, 201)
    deposit = call(
        "POST",
        f"/v1/customers/{customer['customer_code']}/deposits",
        {"asset": "USDC", "amount": "1000"},
        201,
    )
    print(f"PERPSIM_BROKER={customer['broker_code']}")
    print(f"PERPSIM_CUSTOMER={customer['customer_code']}")
    print(f"PERPSIM_TRANSFER={deposit['code']}")
    print("PERPSIM_SYMBOL=BTC-USDC-PERP")


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]))
