// A broker's ed25519 private key (PKCS#8 PEM) imported into WebCrypto, for the pages that sign
// with it (/docs, /console): kept in the page's memory only. Imported once extractable, only to
// read the public key from its JWK; the key that signs is imported again, not extractable.
// Answers the key and its public key in standard base64 (D2's X-Public-Key).
async function perpsimImportKey(pem) {
  const body = pem.replace(/-----(BEGIN|END) PRIVATE KEY-----/g, "").replace(/\s+/g, "");
  const der = Uint8Array.from(atob(body), (c) => c.charCodeAt(0));
  const algorithm = { name: "Ed25519" };
  const readable = await crypto.subtle.importKey("pkcs8", der, algorithm, true, ["sign"]);
  const jwk = await crypto.subtle.exportKey("jwk", readable);
  const publicKey = btoa(atob(jwk.x.replace(/-/g, "+").replace(/_/g, "/")));
  const key = await crypto.subtle.importKey("pkcs8", der, algorithm, false, ["sign"]);
  return { key, publicKey };
}
