"""Issue 28 item 3: a person in /docs places an order, signed in the page.

Headless Chromium opens the service's /docs page; through the DevTools protocol this script
does what a person does there: pastes the broker's private key into the signing panel, opens
"createOrder", clicks "Try it out", fills the customer code and the body, clicks "Execute",
and reads the answer the page shows. It prints that answer as JSON; run.sh checks it is 201
and that the order is there over REST.

    python docs_sign.py URL KEY_FILE CUSTOMER_CODE REFERENCE_ID
"""

import asyncio
import json
import sys

import websockets

import chromium

DRIVE = r"""
async (pem, customer, body) => {
  const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
  const until = async (what, find) => {
    const end = Date.now() + 30000;
    while (Date.now() < end) {
      const found = find();
      if (found) return found;
      await sleep(100);
    }
    throw new Error("timed out waiting for " + what);
  };
  // Swagger UI's inputs are React's: set through the native setter, then tell React.
  const type = (el, value) => {
    const proto = el instanceof HTMLTextAreaElement ? HTMLTextAreaElement.prototype : HTMLInputElement.prototype;
    Object.getOwnPropertyDescriptor(proto, "value").set.call(el, value);
    el.dispatchEvent(new Event("input", { bubbles: true }));
    el.dispatchEvent(new Event("change", { bubbles: true }));
  };
  type(document.getElementById("perpsim-key"), pem);
  document.getElementById("perpsim-use-key").click();
  const status = document.getElementById("perpsim-key-status");
  await until("the key in use", () => status.textContent.startsWith("Signing"));
  const op = await until("createOrder", () => document.getElementById("operations-Orders-createOrder"));
  op.querySelector(".opblock-control-arrow").click();
  (await until("Try it out", () => op.querySelector(".try-out__btn"))).click();
  type(await until("the code field", () => op.querySelector('tr[data-param-name="code"] input')), customer);
  type(await until("the body", () => op.querySelector("textarea.body-param__text")), body);
  await sleep(1500); // Swagger UI debounces its inputs before they reach its state
  (await until("Execute", () => op.querySelector(".execute"))).click();
  const answer = await until("the answer", () => op.querySelector(".live-responses-table tbody .response-col_status"));
  const shown = op.querySelector(".live-responses-table .response-col_description pre, .live-responses-table .microlight");
  return JSON.stringify({
    signed_as: status.textContent,
    status: answer.textContent.trim(),
    body: shown ? shown.textContent : "",
    key_left_in_page: document.getElementById("perpsim-key").value,
  });
}
"""


async def evaluate(ws, ident, expression):
    """The value of `expression` in the page (awaited when it is a promise)."""
    await ws.send(json.dumps({
        "id": ident,
        "method": "Runtime.evaluate",
        "params": {"expression": expression, "awaitPromise": True, "returnByValue": True},
    }))
    while True:
        reply = json.loads(await ws.recv())
        if reply.get("id") != ident:
            continue
        result = reply["result"]
        if "exceptionDetails" in result:
            raise SystemExit("the page failed: " + json.dumps(result["exceptionDetails"]))
        return result["result"].get("value")


async def drive(ws_url, pem, customer, body):
    async with websockets.connect(ws_url, max_size=None) as ws:
        loaded = "document.readyState === 'complete' && !!document.getElementById('perpsim-key')"
        for ident in range(2, 302):
            if await evaluate(ws, ident, loaded):
                break
            await asyncio.sleep(0.1)
        else:
            raise SystemExit("the /docs page did not load")
        call = f"({DRIVE})({json.dumps(pem)}, {json.dumps(customer)}, {json.dumps(body)})"
        return json.loads(await evaluate(ws, 1, call))


def main():
    url, key_file, customer, reference = sys.argv[1:5]
    with chromium.page(f"{url}/docs") as ws_url:
        body = json.dumps({"symbol": "BTC-USDC-PERP", "side": "buy", "type": "limit",
                           "reference_id": reference, "amount": "0.001", "limit_price": "50000"})
        pem = open(key_file).read()
        answer = asyncio.run(drive(ws_url, pem, customer, body))
        print(json.dumps(answer))


if __name__ == "__main__":
    main()
