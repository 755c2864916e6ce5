"""D2 request signing for the generated Python client: the few lines to copy.

Every /v1 request carries X-Public-Key, X-Nonce (nanosecond Unix time, never reused) and
X-Signature: ed25519 over "{nonce}\\n{METHOD}\\n{path_and_query}\\n{body}". The hook below signs
each request just before httpx sends it.
"""

import base64
import threading
import time

import httpx
from cryptography.hazmat.primitives.serialization import (
    Encoding,
    PublicFormat,
    load_pem_private_key,
)


def signer(pem: bytes):
    """An httpx request hook that signs with the PKCS#8 PEM ed25519 key `pem`."""
    key = load_pem_private_key(pem, password=None)
    public = base64.b64encode(
        key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    ).decode()
    lock, last = threading.Lock(), [0]

    def sign(request: httpx.Request) -> None:
        with lock:  # nonces strictly increase, so two requests never share one
            last[0] = max(time.time_ns(), last[0] + 1)
            nonce = str(last[0])
        message = f"{nonce}\n{request.method}\n{request.url.raw_path.decode()}\n".encode()
        request.headers["X-Public-Key"] = public
        request.headers["X-Nonce"] = nonce
        request.headers["X-Signature"] = base64.b64encode(
            key.sign(message + request.read())
        ).decode()

    return sign


def signed_client(base_url: str, pem: bytes):
    """A generated client whose every request is signed."""
    from perpsim_client import AuthenticatedClient

    # The generated client sends its token in one header; the hook overwrites that header
    # (X-Signature) with the real signature and adds the other two.
    return AuthenticatedClient(
        base_url=base_url,
        token="",
        prefix="",
        auth_header_name="X-Signature",
        httpx_args={"event_hooks": {"request": [signer(pem)]}},
    )
