// D2 signing for the /docs page's "Try it out": a broker's private key pasted into the panel is
// imported into WebCrypto (Ed25519) and kept in this page's memory only — never stored, never
// sent — and every /v1 request the page sends carries X-Public-Key, X-Nonce and X-Signature
// over `{nonce}\n{METHOD}\n{path_and_query}\n{body}`, exactly as a broker's client signs.
// Only requests to this service are signed: the signature does not cover the host, so a
// request signed for another origin could be replayed here inside the nonce window.
(function () {
  const ownOrigins = new Set([window.location.origin, new URL("__PERPSIM_BASE__").origin]);
  let signer = null;
  const status = (text) => { document.getElementById("perpsim-key-status").textContent = text; };

  async function useKey(pem) {
    signer = await perpsimImportKey(pem); // ed25519_key.js, ahead of this in the script
    return signer.publicKey;
  }

  async function perpsimUseKey() {
    const box = document.getElementById("perpsim-key");
    try {
      const publicKey = await useKey(box.value);
      status("Signing /v1 requests as " + publicKey + " (the key is in this page's memory only).");
    } catch (e) {
      signer = null;
      status("Not a PKCS#8 PEM ed25519 private key (" + e + "); requests go unsigned.");
    }
    box.value = "";
  }

  function perpsimForgetKey() {
    signer = null;
    status("No key: requests go unsigned and /v1 answers 401.");
  }

  // Handlers attached here, not inline: the page's Content-Security-Policy runs only the
  // scripts it names by hash.
  document.getElementById("perpsim-use-key").addEventListener("click", perpsimUseKey);
  document.getElementById("perpsim-forget-key").addEventListener("click", perpsimForgetKey);

  // Swagger UI's requestInterceptor: may return a promise of the request.
  window.perpsimSign = async function (request) {
    const url = new URL(request.url, window.location.href);
    if (!signer || !ownOrigins.has(url.origin) || !url.pathname.startsWith("/v1/")) {
      return request;
    }
    const body = typeof request.body === "string" ? request.body : "";
    const method = request.method.toUpperCase();
    const { nonce, signature } = await signer.sign(method, url.pathname + url.search, body);
    request.headers["X-Public-Key"] = signer.publicKey;
    request.headers["X-Nonce"] = nonce;
    request.headers["X-Signature"] = signature;
    return request;
  };
})();
