#!/usr/bin/env python3
"""Writes recorded-hour.csv.gz: two hours of a Tardis.dev `derivative_ticker` recording
(binance-futures, BTCUSDT and ETHUSDT) in the format's columns, since no real data can be
downloaded where the tests run. The path is made up but shaped like a recording: a ticker
row each 5 s per symbol (index and mark from the mark-price stream, the 8-hour funding rate
of the next settlement), open-interest rows between them that leave the prices empty, and a
fall of BTC from 42 300 to 25 500 between 00:40 and 00:46 with a partial rebound
to 31 000 by 01:10. Its first
rows are the shape of the sample the format's documentation shows.

Deterministic: the same bytes on every run (seeded, gzip without a timestamp).
Run from this directory: python3 make-recorded-hour.py
"""
import gzip
import io
import random

HEADER = ("exchange,symbol,timestamp,local_timestamp,funding_timestamp,funding_rate,"
          "predicted_funding_rate,open_interest,last_price,index_price,mark_price")
T0 = 1704067200000000  # 2024-01-01T00:00:00Z in microseconds
STEP = 5_000_000
SECONDS = 2 * 3600


def btc_index(s, rng):
    """BTC's index at `s` seconds: a drift, the fall between 00:40 and 00:46, a rebound."""
    if s < 2400:
        base = 42000 + 300 * (s / 2400)
    elif s < 2760:
        base = 42300 - 16800 * ((s - 2400) / 360)
    elif s < 4200:
        base = 25500 + 5500 * ((s - 2760) / 1440)
    else:
        base = 31000 + 500 * ((s - 4200) / 3000)
    return round(base + rng.uniform(-15, 15), 1)


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


def main():
    text = "\n".join([HEADER, *rows()]) + "\n"
    out = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=out, mtime=0) as gz:
        gz.write(text.encode())
    with open("recorded-hour.csv.gz", "wb") as f:
        f.write(out.getvalue())


if __name__ == "__main__":
    main()
