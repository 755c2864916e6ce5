"""D2 request signing for `requests`: ed25519 over "{nonce}\\n{METHOD}\\n{path_and_query}\\n{body}"."""

import base64
import threading
import time

import requests
from cryptography.hazmat.primitives.serialization import (
    Encoding,
    PublicFormat,
    load_pem_private_key,
)


class D2Signature(requests.auth.AuthBase):
    """Signs a prepared request exactly as it goes on the wire."""

    def __init__(self, pem: bytes) -> None:
        self.key = load_pem_private_key(pem, password=None)
        raw = self.key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
        self.public = base64.b64encode(raw).decode()
        self.lock, self.last = threading.Lock(), 0

    def __call__(self, r: requests.PreparedRequest) -> requests.PreparedRequest:
        with self.lock:  # two requests never share a nonce
            self.last = max(time.time_ns(), self.last + 1)
            nonce = str(self.last)
        body = r.body or b""
        if isinstance(body, str):
            body = body.encode()
        message = f"{nonce}\n{r.method}\n{r.path_url}\n".encode() + body
        r.headers["X-Public-Key"] = self.public
        r.headers["X-Nonce"] = nonce
        r.headers["X-Signature"] = base64.b64encode(self.key.sign(message)).decode()
        return r
