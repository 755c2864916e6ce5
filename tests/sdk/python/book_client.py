"""A perpsim WebSocket client (interface §6, D9), as docs/websocket.md shows it.

It connects to /v1/ws, authenticates with a broker's ed25519 key (optional: the book is a
public topic), subscribes to orderbook-stream:{symbol}, keeps a local book from the snapshot
and the updates, proves it by every frame's checksum, and resyncs (subscribes again for a
new snapshot) on a sequence gap, a checksum that does not match, or a channel-scoped upstream
error; a closed connection is reopened. It stops after --seconds, or when --until-file
exists and the stream has been quiet for a second, and prints what it holds as JSON.

    python book_client.py ws://127.0.0.1:8080/v1/ws --symbol BTC-USDC-PERP \
        [--key data/demo-broker.key] [--seconds 30] [--until-file FILE]
"""

import argparse
import asyncio
import base64
import json
import os
import time
import zlib

import websockets
from cryptography.hazmat.primitives.serialization import load_pem_private_key


class Book:
    """Levels as the frames carry them: price text -> amount text."""

    def __init__(self, snapshot):
        self.bids = {l["price"]: l["amount"] for l in snapshot["bids"]}
        self.asks = {l["price"]: l["amount"] for l in snapshot["asks"]}
        self.sequence = snapshot["sequence"]

    def apply(self, changes):
        for c in changes:
            side = self.bids if c["type"] == "bid" else self.asks
            if c["action"] == "delete":
                side.pop(c["price"], None)
            else:
                side[c["price"]] = c["amount"]

    def best(self, side, n):
        levels = sorted(side.items(), key=lambda kv: float(kv[0]), reverse=side is self.bids)
        return levels[:n]

    def checksum(self):
        """CRC-32 of the best 10 asks (lowest first) then the best 10 bids (highest first),
        each "price:amount", joined by "|" (the document's definition)."""
        levels = self.best(self.asks, 10) + self.best(self.bids, 10)
        return zlib.crc32("|".join(f"{p}:{a}" for p, a in levels).encode())


def authenticate_frame(key_path):
    key = load_pem_private_key(open(key_path, "rb").read(), password=None)
    public = key.public_key().public_bytes_raw()
    nonce = str(time.time_ns())
    signature = key.sign(f"{nonce}\nGET\n/v1/ws\n".encode())
    return {
        "op": "authenticate",
        "public_key": base64.b64encode(public).decode(),
        "nonce": nonce,
        "signature": base64.b64encode(signature).decode(),
    }


async def follow(url, topic, key_path, deadline, until_file, stats):
    """One connection: returns the book it holds when it stops, or None when it was closed."""
    book = None
    quiet_since = time.monotonic()
    async with websockets.connect(url, ping_interval=5) as ws:
        if key_path:
            await ws.send(json.dumps(authenticate_frame(key_path)))
            reply = json.loads(await ws.recv())
            assert reply == {"op": "authenticated"}, reply
        await ws.send(json.dumps({"op": "subscribe", "args": [topic]}))
        while time.monotonic() < deadline:
            if until_file and os.path.exists(until_file) and time.monotonic() - quiet_since > 1:
                return book
            try:
                frame = json.loads(await asyncio.wait_for(ws.recv(), timeout=0.25))
            except asyncio.TimeoutError:
                continue
            quiet_since = time.monotonic()
            stats["frames"] += 1
            resync = None
            if frame.get("op") == "error" and frame.get("channel") == topic:
                resync = "upstream error " + frame["code"]
            elif frame.get("channel") != topic:
                continue
            elif frame["type"] == "snapshot":
                book = Book(frame)
                if book.checksum() != frame["checksum"]:
                    resync = "snapshot checksum"
            elif book is None:
                continue
            elif frame["sequence"] != book.sequence + 1:
                resync = f"gap: {book.sequence} then {frame['sequence']}"
            else:
                book.apply(frame["changes"])
                book.sequence = frame["sequence"]
                if book.checksum() != frame["checksum"]:
                    resync = "checksum"
                else:
                    stats["verified"] += 1
            if resync:
                stats["resyncs"].append(resync)
                book = None
                await ws.send(json.dumps({"op": "subscribe", "args": [topic]}))
    return book


async def main():
    p = argparse.ArgumentParser()
    p.add_argument("url")
    p.add_argument("--symbol", default="BTC-USDC-PERP")
    p.add_argument("--key")
    p.add_argument("--seconds", type=float, default=30)
    p.add_argument("--until-file")
    args = p.parse_args()
    topic = f"orderbook-stream:{args.symbol}"
    deadline = time.monotonic() + args.seconds
    stats = {"frames": 0, "verified": 0, "resyncs": [], "reconnects": 0}
    book = None
    while time.monotonic() < deadline:
        try:
            book = await follow(args.url, topic, args.key, deadline, args.until_file, stats)
            break
        except websockets.ConnectionClosed:
            stats["reconnects"] += 1
    top = {"best_bid": None, "best_ask": None}
    if book:
        top = {
            "best_bid": (book.best(book.bids, 1) or [[None]])[0][0],
            "best_ask": (book.best(book.asks, 1) or [[None]])[0][0],
        }
    print(json.dumps({**stats, **top, "sequence": book and book.sequence}))


if __name__ == "__main__":
    asyncio.run(main())
