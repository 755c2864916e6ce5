// Smoke test of the TypeScript client generated from openapi/broker.json (openapi-typescript
// types, openapi-fetch calls), against the real binary on loopback (manual clock). Compiled
// with `tsc --strict`: the null types of the document are what this code has to handle.
//
// Usage: node smoke.js BASE_URL DATA_DIR
import { readFileSync } from "node:fs";
import { join } from "node:path";
import createClient from "openapi-fetch";
import type { paths } from "./schema.js";
import { signer } from "./signing.js";

const [baseUrl, dataDir] = process.argv.slice(2);
const BTC = "BTC-USDC-PERP";

function check(condition: boolean, what: string): void {
  if (!condition) throw new Error(`failed: ${what}`);
  console.log(`ok   ${what}`);
}

function must<T>(value: T | undefined, what: string): T {
  if (value === undefined) throw new Error(`no answer: ${what}`);
  return value;
}

const client = createClient<paths>({ baseUrl });
client.use(signer(readFileSync(join(dataDir, "demo-broker.key"), "utf8")));
const token = readFileSync(join(dataDir, "admin.token"), "utf8").trim();

async function advance(seconds: number): Promise<void> {
  const r = await fetch(`${baseUrl}/admin/v1/clock/advance`, {
    method: "POST",
    headers: { Authorization: `Bearer ${token}`, "Content-Type": "application/json" },
    body: JSON.stringify({ seconds }),
  });
  check(r.ok, `clock advanced ${seconds} s`);
}

async function funded(externalId: string): Promise<string> {
  const created = await client.POST("/v1/customers", { body: { external_id: externalId } });
  const customer = must(created.data, "createCustomer");
  const deposit = await client.POST("/v1/customers/{code}/deposits", {
    params: { path: { code: customer.customer_code } },
    body: { asset: "USDC", amount: "100000" },
  });
  check(must(deposit.data, "createDeposit").status === "pending", "a deposit answers pending");
  return customer.customer_code;
}

async function main(): Promise<void> {
  const a = await funded("sdk-ts-a");
  const b = await funded("sdk-ts-b");
  await advance(1);
  const balances = await client.GET("/v1/customers/{code}/balances", {
    params: { path: { code: a } },
  });
  check(must(balances.data, "balances")[0].total === "100000.0000000000", "deposit completed");

  const orders = { params: { path: { code: a } } };
  const placed = must(
    (
      await client.POST("/v1/customers/{code}/orders", {
        ...orders,
        body: {
          symbol: BTC,
          side: "buy",
          type: "limit",
          reference_id: "ts-1",
          amount: "0.010",
          limit_price: "50000",
        },
      })
    ).data,
    "createOrder",
  );
  check(placed.status === "open" && placed.expire_time === null, "order open, expire_time null");
  const one = { params: { path: { code: a, reference_id: "ts-1" } } };
  const amended = await client.PATCH("/v1/customers/{code}/orders/{reference_id}", {
    ...one,
    body: { limit_price: "50100" },
  });
  check(must(amended.data, "amendOrder").limit_price === "50100.0", "order amended");
  const open = must((await client.GET("/v1/customers/{code}/orders", orders)).data, "open");
  check(open.data.map((o) => o.reference_id).join() === "ts-1", "open orders listed");
  const canceled = await client.DELETE("/v1/customers/{code}/orders/{reference_id}", one);
  check(must(canceled.data, "cancelOrder").status === "canceled", "order canceled");

  await client.POST("/v1/customers/{code}/orders", {
    params: { path: { code: b } },
    body: {
      symbol: BTC,
      side: "sell",
      type: "limit",
      reference_id: "ts-ask",
      amount: "0.010",
      limit_price: "60000",
    },
  });
  const taken = must(
    (
      await client.POST("/v1/customers/{code}/orders", {
        ...orders,
        body: { symbol: BTC, side: "buy", type: "market", reference_id: "ts-take", amount: "0.010" },
      })
    ).data,
    "market order",
  );
  check(taken.status === "filled" && taken.avg_fill_price === "60000.0", "market order filled");
  const positions = must(
    (await client.GET("/v1/customers/{code}/positions", orders)).data,
    "positions",
  );
  check(positions.length === 1 && positions[0].side === "long", "a long position");

  const query = { customer_code: a, limit: 1 };
  const first = must(
    (await client.GET("/v1/customers/transactions", { params: { query } })).data,
    "first page",
  );
  const cursor = first.response_metadata.end_cursor;
  check(first.response_metadata.has_next && cursor !== null, "first page, more after it");
  const second = must(
    (
      await client.GET("/v1/customers/transactions", {
        params: { query: { ...query, after: cursor ?? undefined } },
      })
    ).data,
    "second page",
  );
  check(
    second.data[0].code !== first.data[0].code && second.response_metadata.has_previous,
    "second page through the cursor",
  );

  const missing = await client.GET("/v1/customers/{code}/orders/{reference_id}", {
    params: { path: { code: a, reference_id: "nope" } },
  });
  check(
    missing.response.status === 404 && missing.error?.code === "NOT_FOUND",
    "a 404 decoded into ErrorBody",
  );
  console.log("typescript sdk smoke: 1 passed, 0 failed");
}

main().catch((e: unknown) => {
  console.error(e);
  process.exit(1);
});
