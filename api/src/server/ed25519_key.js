// A broker's ed25519 private key (PKCS#8 PEM) imported into WebCrypto, for the pages that sign
// with it (/docs, /console): kept in the page's memory only. Imported once extractable, only to
// read the public key from its JWK; the key that signs is imported again, not extractable.
// Answers its public key in standard base64 (D2's X-Public-Key) and `sign`, which signs
// `{nonce}\n{METHOD}\n{path_and_query}\n{body}` as a broker's client does (D2).
let perpsimLastNonce = 0n;

async function perpsimImportKey(pem) {
  const body = pem.replace(/-----(BEGIN|END) PRIVATE KEY-----/g, "").replace(/\s+/g, "");
  const der = Uint8Array.from(atob(body), (c) => c.charCodeAt(0));
  const algorithm = { name: "Ed25519" };
  const readable = await crypto.subtle.importKey("pkcs8", der, algorithm, true, ["sign"]);
  const jwk = await crypto.subtle.exportKey("jwk", readable);
  const publicKey = btoa(atob(jwk.x.replace(/-/g, "+").replace(/_/g, "/")));
  const key = await crypto.subtle.importKey("pkcs8", der, algorithm, false, ["sign"]);
  // The nonce: nanoseconds since the epoch, strictly increasing within the page (D2: never
  // reused), whichever key signs. Answers it and the signature (standard base64) as text.
  async function sign(method, pathAndQuery, body) {
    let nonce = BigInt(Date.now()) * 1000000n;
    if (nonce <= perpsimLastNonce) nonce = perpsimLastNonce + 1n;
    perpsimLastNonce = nonce;
    const message = nonce + "\n" + method + "\n" + pathAndQuery + "\n" + body;
    const signature = await crypto.subtle.sign(
      algorithm, key, new TextEncoder().encode(message));
    const encoded = btoa(String.fromCharCode(...new Uint8Array(signature)));
    return { nonce: nonce.toString(), signature: encoded };
  }
  return { publicKey, sign };
}
