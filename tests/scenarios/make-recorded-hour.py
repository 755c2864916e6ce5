#!/usr/bin/env python3
"""Writes recorded-hour.csv.gz: two hours of a Tardis.dev `derivative_ticker` recording
(binance-futures, BTCUSDT and ETHUSDT) in the format's columns, since no real data can be
downloaded where the tests run; and for the same two hours of BTCUSDT, recorded-book.csv.gz,
a `book_snapshot_5` row each 5 s (five levels 0.5 apart each side of the index, the best
bid on a 2.5 grid, 0.2 to 3 BTC each), and recorded-trades.csv.gz, a `trades` row each 2 s at the best bid or ask (sells
larger and more often during the fall). The path is made up but shaped like a recording: a ticker
row each 5 s per symbol (index and mark from the mark-price stream, the 8-hour funding rate
of the next settlement), open-interest rows between them that leave the prices empty, and a
fall of BTC from 42 300 to 25 500 between 00:40 and 00:46 with a partial rebound
to 31 000 by 01:10. Its first
rows are the shape of the sample the format's documentation shows.

Deterministic: the same bytes on every run (seeded, gzip without a timestamp).
Run from this directory: python3 make-recorded-hour.py
"""
import gzip
import math
import io
import random

HEADER = ("exchange,symbol,timestamp,local_timestamp,funding_timestamp,funding_rate,"
          "predicted_funding_rate,open_interest,last_price,index_price,mark_price")
T0 = 1704067200000000  # 2024-01-01T00:00:00Z in microseconds
STEP = 5_000_000
SECONDS = 2 * 3600


def base(s):
    """BTC's index at `s` seconds before its noise: a drift, the fall between 00:40 and 00:46,
    a rebound."""
    if s < 2400:
        return 42000 + 300 * (s / 2400)
    if s < 2760:
        return 42300 - 16800 * ((s - 2400) / 360)
    if s < 4200:
        return 25500 + 5500 * ((s - 2760) / 1440)
    return 31000 + 500 * ((s - 4200) / 3000)


def btc_index(s, rng):
    """BTC's index at `s` seconds, with its noise."""
    return round(base(s) + rng.uniform(-15, 15), 1)


def funding(s):
    """The 8-hour rate of the next settlement (00:00, 08:00): higher after the rebound."""
    return "0.00010000" if s < 3600 else "0.00030000"


def rows():
    rng = random.Random(39)
    next_funding = T0 + 8 * 3600 * 1_000_000
    for s in range(0, SECONDS, STEP // 1_000_000):
        t = T0 + s * 1_000_000
        local = t + rng.randint(100_000, 250_000)
        index = btc_index(s, rng)
        mark = round(index + rng.uniform(-8, 8), 1)
        yield (f"binance-futures,BTCUSDT,{t},{local},{next_funding},{funding(s)},"
               f"{funding(s)},,{mark},{index:.8f},{mark:.8f}")
        eth = round(2280 + 0.01 * s + rng.uniform(-2, 2), 2)
        yield (f"binance-futures,ETHUSDT,{t + 1000},{local + 1000},{next_funding},0.00010000,"
               f"0.00010000,,{eth},{eth:.8f},{eth:.8f}")
        if s % 60 == 0:
            interest = 81000 + rng.randint(-500, 500)
            yield f"binance-futures,BTCUSDT,{t + 2000},{local + 2000},,,,{interest}.000,,,"


BOOK_HEADER = "exchange,symbol,timestamp,local_timestamp," + ",".join(
    f"asks[{k}].price,asks[{k}].amount,bids[{k}].price,bids[{k}].amount" for k in range(5))
TRADES_HEADER = "exchange,symbol,timestamp,local_timestamp,id,side,price,amount"


def best(s):
    """The best bid at `s` seconds: under the index on a 2.5 grid, so a level stands for a
    while (the ask a dollar above it)."""
    return math.floor((base(s) - 0.5) / 2.5) * 2.5


def books():
    """Each book row's second, its best bid and ask, and the row."""
    rng = random.Random(391)
    for s in range(0, SECONDS, 5):
        t = T0 + s * 1_000_000
        bid = best(s)
        levels = []
        for k in range(5):
            ask_amount = round(rng.uniform(0.2, 3), 3)
            bid_amount = round(rng.uniform(0.2, 3), 3)
            levels.append(f"{bid + 1 + 0.5 * k:.1f},{ask_amount},{bid - 0.5 * k:.1f},{bid_amount}")
        row = f"binance-futures,BTCUSDT,{t},{t + 150_000}," + ",".join(levels)
        yield s, bid, round(bid + 1, 1), row


def trade_rows(tops):
    """A trade each 2 s at the best bid (a sell) or ask (a buy) of the book row before it."""
    rng = random.Random(392)
    for n, s in enumerate(range(0, SECONDS, 2)):
        t = T0 + s * 1_000_000 + 500_000
        bid, ask = tops[s - s % 5]
        falling = 2400 <= s < 2760
        sell = rng.random() < (0.8 if falling else 0.5)
        amount = round(rng.uniform(0.001, 1.5 if falling else 0.4), 3)
        side, price = ("sell", bid) if sell else ("buy", ask)
        yield f"binance-futures,BTCUSDT,{t},{t + 120_000},{n + 1},{side},{price:.1f},{amount}"


def write(name, header, lines):
    text = "\n".join([header, *lines]) + "\n"
    out = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=out, mtime=0) as gz:
        gz.write(text.encode())
    with open(name, "wb") as f:
        f.write(out.getvalue())


def main():
    write("recorded-hour.csv.gz", HEADER, rows())
    book = list(books())
    write("recorded-book.csv.gz", BOOK_HEADER, (row for _, _, _, row in book))
    tops = {s: (bid, ask) for s, bid, ask, _ in book}
    write("recorded-trades.csv.gz", TRADES_HEADER, trade_rows(tops))


if __name__ == "__main__":
    main()
