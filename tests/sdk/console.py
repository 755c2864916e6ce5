"""Issue 40 item 3: the venue console used as a person uses it, in headless Chromium.

Against a living market on the manual clock (the random walk and the market maker), through
the DevTools protocol, this script opens /console and, stage by stage, does what a person does
there and asserts what the page shows; a screenshot of each stage goes to OUT_DIR:

  1. the page loads: the instrument's ticker, a checksum-verified book and its depth chart;
  2. the admin token and the broker key pasted: the venue's accounts and the signed channel;
  3. the page's controls: the clock advanced and run to a time (the page's clock follows), the
     funding rate set (the ticker's predicted rate shows it), the status set (REST shows it);
  4. an order placed from the API (the `perpsim curl` CLI) fills against the maker: the trade
     is on the page's tape and the depth chart redraws;
  5. the page's price control drops the mark: the customer's row turns to margin_call, the
     change is in the page's events, and a click on the row shows the customer's position;
     dropped below the liquidation threshold, the liquidation's fill is in the page's events;
  6. fault plans set from the page corrupt a book checksum, tear the trades down with an
     upstream error and close the page's market connection: the page resyncs, subscribes
     again and reconnects, and the recovery report it shows has the three strikes recovered;
  7. a simulated day advanced with the page open, 30 s at a time: its JS heap, after a
     collection, stays within a bound of what it held after the first hour, and its chart
     lines within their bound of points (item 4: no unbounded memory).

Any exception, or any console error (a Content-Security-Policy refusal included), fails it.

    python console.py URL PERPSIM_BIN DATA_DIR OUT_DIR
"""

import asyncio
import base64
import json
import os
import subprocess
import sys
import time
import urllib.request
from decimal import ROUND_DOWN, Decimal

import websockets

import chromium

SYMBOL = "BTC-USDC-PERP"
# What the page may hold after a simulated day beyond what it held after the first hour: its
# collections are bounded (console.js, BOUNDS), so growth is the engine's garbage, not state.
HEAP_GROWTH_BOUND = 4 * 1024 * 1024
# Once every bounded collection is full (hour 18), the heap stays flat to within this.
HEAP_FLAT_BOUND = 512 * 1024


class Page:
    """One page target through the DevTools protocol."""

    def __init__(self, ws):
        self.ws = ws
        self.ident = 0
        self.errors = []

    async def call(self, method, **params):
        self.ident += 1
        ident = self.ident
        await self.ws.send(json.dumps({"id": ident, "method": method, "params": params}))
        while True:
            message = json.loads(await self.ws.recv())
            if message.get("id") == ident:
                if "error" in message:
                    raise SystemExit(f"{method}: {message['error']}")
                return message["result"]
            self.note(message)

    def note(self, event):
        method, params = event.get("method"), event.get("params", {})
        if method == "Runtime.exceptionThrown":
            self.errors.append(json.dumps(params["exceptionDetails"])[:600])
        elif method == "Runtime.consoleAPICalled" and params.get("type") == "error":
            self.errors.append(json.dumps(params["args"])[:600])
        elif method == "Log.entryAdded" and params["entry"]["level"] == "error":
            self.errors.append(params["entry"]["text"][:600])

    async def eval(self, expression):
        result = await self.call("Runtime.evaluate", expression=expression, awaitPromise=True,
                                 returnByValue=True)
        if "exceptionDetails" in result:
            raise SystemExit("the page failed: " + json.dumps(result["exceptionDetails"])[:800])
        return result["result"].get("value")

    async def until(self, what, expression, seconds=30):
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            value = await self.eval(expression)
            if value:
                return value
            await asyncio.sleep(0.1)
        seen = await self.eval("JSON.stringify(window.perpsimConsole && "
                               "window.perpsimConsole.stats)")
        raise SystemExit(f"timed out waiting for {what}: {expression}; the page's stats: {seen}")

    async def text(self, element_id):
        return await self.eval(f"document.getElementById({json.dumps(element_id)}).textContent")

    async def type(self, element_id, value):
        await self.eval(f"document.getElementById({json.dumps(element_id)}).value = "
                        f"{json.dumps(value)}")

    async def click(self, element_id):
        await self.eval(f"document.getElementById({json.dumps(element_id)}).click()")

    async def screenshot(self, path):
        shot = await self.call("Page.captureScreenshot", format="png", captureBeyondViewport=True)
        with open(path, "wb") as f:
            f.write(base64.b64decode(shot["data"]))

    async def heap(self):
        await self.call("HeapProfiler.collectGarbage")
        return (await self.call("Runtime.getHeapUsage"))["usedSize"]


class Venue:
    """The service from outside: the CLI for the broker's API and the admin API."""

    def __init__(self, url, binary, data_dir):
        self.cli = [binary]
        self.flags = ["--url", url, "--data-dir", data_dir]

    def curl(self, method, path, body=None, field=None):
        args = self.cli + ["curl", method, path] + ([body] if body else [])
        args += (["--field", field] if field else []) + self.flags
        return run(args)

    def admin(self, *args):
        return run(self.cli + ["admin"] + self.flags + list(args))


def run(args):
    done = subprocess.run(args, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(args)}: exit {done.returncode}\n{done.stdout}{done.stderr}")
    return done.stdout.strip()


def stats(name):
    return f"window.perpsimConsole.stats.{name}"


def cell_texts(table_id):
    return (f"[...document.getElementById('{table_id}').tBodies[0].rows]"
            ".map(r => [...r.cells].map(c => c.title || c.textContent))")


async def stage_market(page, out):
    await page.until("the page", "document.readyState === 'complete' && "
                     "!!document.getElementById('symbol') && !!window.perpsimConsole")
    await page.until("the instrument", f"document.getElementById('symbol').value === '{SYMBOL}'")
    await page.until("a verified book", f"{stats('verified')} + {stats('bookFrames')} > 0 && "
                     "document.getElementById('book').tBodies[0].rows.length > 0")
    await page.until("the mark", "document.getElementById('t-mark').textContent !== '–'")
    await page.until("the depth chart", f"{stats('depthDraws')} > 0")
    await page.screenshot(os.path.join(out, "console-1-market.png"))


async def stage_credentials(page, data_dir, out):
    await page.type("admin-token", open(os.path.join(data_dir, "admin.token")).read().strip())
    await page.click("use-token")
    await page.until("the token in use",
                     "document.getElementById('admin-status').textContent.includes('in use')")
    await page.until("the venue's accounts",
                     "document.getElementById('venue-accounts').tBodies[0].rows.length >= 4")
    await page.type("broker-key", open(os.path.join(data_dir, "demo-broker.key")).read())
    await page.click("use-key")
    await page.until("the signed channel", "document.getElementById('private-status')"
                     ".textContent.includes('signed in as')")
    assert await page.eval("document.getElementById('broker-key').value") == ""
    assert await page.eval("document.getElementById('admin-token').value") == ""
    await page.screenshot(os.path.join(out, "console-2-credentials.png"))


async def control(page, button):
    await page.eval("document.getElementById('operator-result').textContent = ''")
    await page.click(button)
    await page.until(f"{button} done", "document.getElementById('operator-result').textContent "
                     f"=== '{button}: done'")


async def stage_controls(page, venue):
    """The clock advanced and run to a time, the funding rate and the status set, all from the
    page's controls; each seen where the venue shows it."""
    before = await page.text("clock")
    await page.type("advance-seconds", "5")
    await control(page, "advance")
    await page.until("the clock moved", f"document.getElementById('clock').textContent !== "
                     f"{json.dumps(before)}")
    advanced = await page.text("clock")
    await page.type("advance-to", "2026-01-01T00:00:10Z")
    await control(page, "run-to")
    await page.until("the clock at the time", "document.getElementById('clock').textContent "
                     "=== '2026-01-01T00:00:10.000Z'")
    await page.type("funding-rate", "0.0002")
    await control(page, "set-funding")
    await page.until("the predicted rate", "Number(document.getElementById('t-predicted')"
                     ".textContent) === 0.0002")
    status = f"v1/instruments?symbol={SYMBOL}"
    for value in ("post_only", "active"):
        await page.eval(f"document.getElementById('status-value').value = '{value}'")
        await control(page, "set-status")
        shown = json.loads(venue.curl("GET", status))[0]["status"]
        assert shown == value, (value, shown)
    return advanced


async def stage_trade(page, venue, out):
    customer = venue.curl("POST", "v1/customers", "{}", "customer_code")
    venue.curl("POST", f"v1/customers/{customer}/deposits", '{"asset":"USDC","amount":"1000"}')
    venue.admin("advance", "--seconds", "1")  # the deposit completes
    venue.curl("PUT", f"v1/customers/{customer}/margin-profile", '{"leverage":2}')
    # A resting bid between the maker's levels: a new level in the book table, the depth redrawn.
    draws = await page.eval(stats("depthDraws"))
    bid = Decimal(await page.text("t-bid")) - Decimal("0.5")
    resting = {"symbol": SYMBOL, "side": "buy", "type": "limit", "reference_id": "console-0",
               "amount": "0.0123", "limit_price": str(bid)}
    venue.curl("POST", f"v1/customers/{customer}/orders", json.dumps(resting))
    await page.until("the resting bid in the book", f"{cell_texts('book')}.some(r => "
                     f"r[0] === '0.0123' && Number(r[1]) === {float(bid)})")
    await page.until("the depth chart redrawn", f"{stats('depthDraws')} > {draws}")
    venue.curl("DELETE", f"v1/customers/{customer}/orders/console-0")
    # Near the most leverage 2 allows (1 000 × 2 of notional), so a modest drop calls margin.
    ask = Decimal(await page.text("t-ask"))
    amount = str((Decimal(1900) / ask).quantize(Decimal("0.0001"), ROUND_DOWN))
    order = {"symbol": SYMBOL, "side": "buy", "type": "market", "reference_id": "console-1",
             "amount": amount}
    venue.curl("POST", f"v1/customers/{customer}/orders", json.dumps(order))
    tape = await page.until("the trade on the tape", f"(() => {{ const rows = "
                            f"{cell_texts('tape')}; return rows.some(r => r[1] === 'buy' && "
                            f"Number(r[3]) === {float(amount)}) && rows; }})()")
    await page.screenshot(os.path.join(out, "console-3-trade.png"))
    return customer, tape


async def stage_margin_call(page, venue, customer, out):
    await page.type("advance-seconds", "5")  # the margin channel pushes at each valuation (5 s)
    await page.click("advance")
    await page.until("the customer's row", f"{cell_texts('customers')}.some(r => r[0] === "
                     f"'{customer}')")
    summary = json.loads(venue.curl("GET", f"v1/customers/{customer}/account-summary"))
    position = json.loads(venue.curl("GET", f"v1/customers/{customer}/positions"))[0]
    q, entry = Decimal(position["amount"]), Decimal(position["entry_price"])
    collateral = Decimal(summary["total_equity"]) - Decimal(position["unrealised_pnl"])
    call = Decimal(summary["margin_call_threshold"])
    liquidation = Decimal(summary["liquidation_threshold"])
    ratio = (call + liquidation) / 2
    # equity / notional = ratio at the mark P: (C + q (P - E)) / (q P) = r.
    price = ((q * entry - collateral) / (q * (1 - ratio))).quantize(Decimal("0.1"), ROUND_DOWN)
    await page.type("price-index", str(price))
    await page.type("price-mark", str(price))
    await control(page, "set-price")
    await page.type("advance-seconds", "5")
    await page.click("advance")
    state = await page.until("the margin call on the page", f"(() => {{ const r = "
                             f"{cell_texts('customers')}.find(r => r[0] === '{customer}'); "
                             f"return r && r[7] === 'margin_call' && Number(r[1]) < "
                             f"{float(collateral) / 2} && r; }})()")
    events = await page.text("events")
    assert f"{customer} → margin_call" in events, events
    await page.eval("[...document.getElementById('customers').tBodies[0].rows].find(r => "
                    f"r.cells[0].title === '{customer}').click()")
    await page.until("the customer's positions", f"{cell_texts('positions')}.some(r => "
                     f"r[0] === '{SYMBOL}' && r[1] === 'long' && r[2] === "
                     f"'{position['amount']}')")
    await page.screenshot(os.path.join(out, "console-4-margin-call.png"))
    # Below the liquidation threshold: the venue closes the position, the page shows the fill.
    ratio = liquidation / 2
    low = ((q * entry - collateral) / (q * (1 - ratio))).quantize(Decimal("0.1"), ROUND_DOWN)
    await page.type("price-index", str(low))
    await page.type("price-mark", str(low))
    await control(page, "set-price")
    await page.type("advance-seconds", "5")
    await control(page, "advance")
    await page.until("the liquidation's fill among the events", "[...document.getElementById("
                     "'events').children].some(li => li.textContent.includes("
                     f"'{customer} liquidation: sell {position['amount']} {SYMBOL}'))")
    await page.screenshot(os.path.join(out, "console-5-liquidation.png"))
    return {"price": str(price), "row": state, "liquidated_below": str(low)}


async def strike(page, plan, counter, act=lambda: None):
    """Sets `plan` from the page, does `act`, and advances the clock until the page's
    `counter` moves."""
    await page.type("fault-plan", json.dumps(plan))
    await control(page, "set-faults")
    before = await page.eval(stats(counter))
    act()
    for _ in range(20):
        await page.type("advance-seconds", "2")
        await control(page, "advance")
        if await page.eval(f"{stats(counter)} > {before}"):
            return
        await asyncio.sleep(0.3)
    await page.until(f"the page's {counter}", f"{stats(counter)} > {before}")


async def stage_fault(page, venue, customer, out):
    """A corrupted book checksum, an upstream error tearing the trades down (at a trade the
    customer makes), then a closed connection: the page resyncs, subscribes again, reconnects; the report it shows has the
    three strikes recovered."""
    book = f"orderbook-stream:{SYMBOL}"
    await strike(page, {"seed": 7, "channel": [{"kind": "corrupt_checksum", "topic": book,
                                                "count": 1}]}, "resyncs")
    trades = f"market-trades:{SYMBOL}"
    order = {"symbol": SYMBOL, "side": "buy", "type": "market", "reference_id": "console-2",
             "amount": "0.0010"}
    await strike(page, {"seed": 8, "channel": [{"kind": "upstream_error", "topic": trades,
                                                "count": 1}]}, "resubscribes",
                 lambda: venue.curl("POST", f"v1/customers/{customer}/orders", json.dumps(order)))
    await strike(page, {"seed": 9, "channel": [{"kind": "close", "topic": "ticker",
                                                "count": 1}]}, "reconnects")
    await page.until("the page's book again", f"{stats('verified')} > 0 && document"
                     ".getElementById('book-status').textContent.endsWith('verified')")
    strikes = await page.until("the strikes in the report", f"(() => {{ const rows = "
                               f"{cell_texts('strikes')}; return rows.some(r => r[1] === "
                               f"'corrupt_checksum' && r[4] === 'resubscribed') && rows.some("
                               f"r => r[1] === 'upstream_error' && r[4] === 'resubscribed') && "
                               f"rows.some(r => r[1] === 'close' && r[4] === 'reconnected') && "
                               f"rows; }})()")
    totals = await page.text("report-totals")
    await control(page, "clear-faults")
    await page.until("the faults off", "document.getElementById('faults-active').textContent "
                     "=== 'faults off'")
    await page.screenshot(os.path.join(out, "console-6-fault.png"))
    return {"strikes": strikes, "totals": totals}


def advance(url, token, seconds):
    request = urllib.request.Request(f"{url}/admin/v1/clock/advance", method="POST",
                                     data=json.dumps({"seconds": seconds}).encode(),
                                     headers={"Authorization": f"Bearer {token}",
                                              "Content-Type": "application/json"})
    with urllib.request.urlopen(request) as answer:
        assert answer.status == 200, answer.status


async def stage_day(page, url, data_dir):
    """A simulated day in advances of 30 s, 2 880 of them: as many ticker, book and margin
    frames, more points than a chart line keeps. The heap after the first hour is the base."""
    token = open(os.path.join(data_dir, "admin.token")).read().strip()
    heaps = {}
    for hour in range(1, 25):
        for _ in range(120):
            await asyncio.to_thread(advance, url, token, 30)
        if hour in (1, 18):  # the chart lines are full (2 000 points) after 16.7 hours
            await asyncio.sleep(1)
            heaps[hour] = await page.heap()
    await asyncio.sleep(2)
    first_hour, full, day = heaps[1], heaps[18], await page.heap()
    counts = await page.eval("(() => { const c = window.perpsimConsole; return {book_frames: "
                             "c.stats.bookFrames, margin_frames: c.stats.marginFrames, "
                             "chart_points: c.pricePoints()}; })()")
    assert day <= first_hour + HEAP_GROWTH_BOUND, (first_hour, day)
    assert day <= full + HEAP_FLAT_BOUND, (full, day)
    assert counts["chart_points"] <= 2000, counts
    return {"heap_after_first_hour": first_hour, "heap_when_full": full, "heap_after_day": day,
            **counts,
            "clock": await page.text("clock")}


async def drive(ws_url, args):
    url, binary, data_dir, out = args
    venue = Venue(url, binary, data_dir)
    async with websockets.connect(ws_url, max_size=None) as ws:
        page = Page(ws)
        for domain in ("Runtime.enable", "Log.enable", "Page.enable"):
            await page.call(domain)
        await page.call("Page.navigate", url=f"{url}/console")
        await stage_market(page, out)
        await stage_credentials(page, data_dir, out)
        clock = await stage_controls(page, venue)
        customer, tape = await stage_trade(page, venue, out)
        margin = await stage_margin_call(page, venue, customer, out)
        fault = await stage_fault(page, venue, customer, out)
        day = await stage_day(page, url, data_dir)
        await page.eval("1")  # the events since the last call, read
        if page.errors:
            raise SystemExit("the page logged errors:\n" + "\n".join(page.errors))
        return {"clock_after_advance": clock, "tape_top": tape[0], "margin_call": margin,
                "fault": fault, "day": day, "stats": await page.eval("window.perpsimConsole.stats")}


def main():
    args = sys.argv[1:5]
    os.makedirs(args[3], exist_ok=True)
    with chromium.page("about:blank", window="1600,1500") as ws_url:
        print(json.dumps(asyncio.run(drive(ws_url, args))))


if __name__ == "__main__":
    main()
