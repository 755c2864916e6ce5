// D2 request signing for an openapi-fetch client: the few lines to copy.
//
// Every /v1 request carries X-Public-Key, X-Nonce (nanosecond Unix time, never reused) and
// X-Signature: ed25519 over "{nonce}\n{METHOD}\n{path_and_query}\n{body}".
import { createPrivateKey, createPublicKey, sign } from "node:crypto";
import type { Middleware } from "openapi-fetch";

/** A middleware that signs each request with the PKCS#8 PEM ed25519 key `pem`. */
export function signer(pem: string): Middleware {
  const key = createPrivateKey(pem);
  const spki = createPublicKey(key).export({ format: "der", type: "spki" });
  const publicKey = spki.subarray(spki.length - 32).toString("base64");
  let last = 0n;
  return {
    async onRequest({ request }) {
      // Nonces strictly increase, so two requests never share one.
      const now = BigInt(Date.now()) * 1_000_000n;
      last = now > last ? now : last + 1n;
      const nonce = last.toString();
      const url = new URL(request.url);
      const body = Buffer.from(await request.clone().arrayBuffer());
      const message = Buffer.concat([
        Buffer.from(`${nonce}\n${request.method}\n${url.pathname}${url.search}\n`),
        body,
      ]);
      request.headers.set("X-Public-Key", publicKey);
      request.headers.set("X-Nonce", nonce);
      request.headers.set("X-Signature", sign(null, message, key).toString("base64"));
      return request;
    },
  };
}
