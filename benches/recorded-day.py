#!/usr/bin/env python3
"""Writes a recorded day for the benchmark of issue 39's target ("a recorded day of top of
book and trades replayed with margin and funding in <= 10 s"): into DIR, a Binance USDⓈ-M
`bookTicker` file (a best bid and ask each 100 ms: 864 000 rows), an `aggTrades` file (a
trade each 200 ms at the best bid or ask: 432 000 rows), a Tardis `derivative_ticker` file
(index, mark and the 8-hour rate each second: 86 400 rows) and day.yaml, which replays them
with a leveraged customer who trades through the day. Made up, shaped like BTCUSDT; seeded,
so the same bytes each run.

Run: python3 benches/recorded-day.py DIR && target/release/perpsim replay DIR/day.yaml --out DIR/out
"""
import math
import os
import random
import sys

T0_MS = 1704067200000  # 2024-01-01T00:00:00Z
DAY_S = 86_400


def index(s):
    """A slow wave and a dip at noon: BTC between about 40 000 and 44 000."""
    dip = -1500 * math.exp(-((s - 43_200) / 1_800) ** 2)
    return 42_000 + 1_500 * math.sin(2 * math.pi * s / DAY_S) + dip


def main(out):
    os.makedirs(out, exist_ok=True)
    rng = random.Random(36)
    with open(os.path.join(out, "ticker.csv"), "w") as f:
        f.write("exchange,symbol,timestamp,local_timestamp,funding_timestamp,funding_rate,"
                "predicted_funding_rate,open_interest,last_price,index_price,mark_price\n")
        for s in range(DAY_S):
            t = (T0_MS + s * 1000) * 1000
            i = round(index(s), 1)
            m = round(i + rng.uniform(-3, 3), 1)
            f.write(f"binance-futures,BTCUSDT,{t},{t},,0.0001,,,,{i},{m}\n")
    tops = []
    with open(os.path.join(out, "book.csv"), "w") as f:
        f.write("update_id,best_bid_price,best_bid_qty,best_ask_price,best_ask_qty,"
                "transaction_time,event_time\n")
        for n in range(DAY_S * 10):
            t = T0_MS + n * 100
            bid = round(index(n / 10) + rng.uniform(-2, 2) - 0.1, 1)
            ask = round(bid + 0.1, 1)
            tops.append((bid, ask))
            f.write(f"{n},{bid},{round(rng.uniform(0.1, 8), 3)},{ask},"
                    f"{round(rng.uniform(0.1, 8), 3)},{t},{t + 3}\n")
    with open(os.path.join(out, "trades.csv"), "w") as f:
        f.write("agg_trade_id,price,quantity,first_trade_id,last_trade_id,transact_time,"
                "is_buyer_maker\n")
        for n in range(DAY_S * 5):
            t = T0_MS + n * 200 + 50
            bid, ask = tops[n * 2]
            sell = rng.random() < 0.5
            price = bid if sell else ask
            f.write(f"{n},{price},{round(rng.uniform(0.001, 0.5), 3)},{n},{n},{t},"
                    f"{'true' if sell else 'false'}\n")
    orders = []
    for h in range(24):
        side = "buy" if h % 2 == 0 else "sell"
        orders.append(f"  - {{at: +{h}h10m, customer: risk, order: {{symbol: BTC-USDC-PERP, "
                      f"side: {side}, type: market, reference_id: m{h}, amount: \"0.5\"}}}}")
        price = round(index(h * 3600 + 1800) - 20 if side == "buy" else index(h * 3600 + 1800) + 20)
        orders.append(f"  - {{at: +{h}h30m, customer: risk, order: {{symbol: BTC-USDC-PERP, "
                      f"side: {side}, type: limit, reference_id: l{h}, amount: \"0.2\", "
                      f"limit_price: \"{price}\"}}}}")
    with open(os.path.join(out, "day.yaml"), "w") as f:
        f.write("name: recorded day\nseed: 1\nstart: 2024-01-01T00:00:00Z\nend: +24h\n"
                "sample_every: 1m\nmarket: {price_feed: fixed}\ncustomers:\n"
                "  - {name: risk, leverage: 2, deposits: {USDC: \"100000\"}}\nevents:\n"
                "  - {at: +0s, symbol: BTC-USDC-PERP, recorded: {format: tardis-derivative-ticker, "
                "file: ticker.csv, symbol: BTCUSDT, funding_interval: 8h}}\n"
                "  - {at: +0s, symbol: BTC-USDC-PERP, recorded: {format: binance-book-ticker, "
                "file: book.csv, symbol: BTCUSDT}}\n"
                "  - {at: +0s, symbol: BTC-USDC-PERP, recorded: {format: binance-agg-trades, "
                "file: trades.csv, symbol: BTCUSDT}}\n" + "\n".join(orders) + "\n")


if __name__ == "__main__":
    main(sys.argv[1])
