//! Files in the data dir that hold secrets: the demo broker's private key, the admin token and
//! the cursor MAC key. Written once with mode 0600; their paths are logged, never their
//! contents. This is the only place the service draws OS randomness, and none of it reaches
//! the engine except through journaled commands (a public key).

use std::fs;
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;

use ed25519_dalek::SigningKey;
use ed25519_dalek::pkcs8::spki::der::pem::LineEnding;
use ed25519_dalek::pkcs8::{DecodePrivateKey, EncodePrivateKey, KeypairBytes};
use perpsim_core::ids::hex;

pub const DEMO_KEY_FILE: &str = "demo-broker.key";
pub const ADMIN_TOKEN_FILE: &str = "admin.token";
pub const CURSOR_SECRET_FILE: &str = "cursor.secret";
pub const JOURNAL_FILE: &str = "journal.redb";

pub fn random_bytes<const N: usize>() -> [u8; N] {
    let mut bytes = [0u8; N];
    getrandom::fill(&mut bytes).expect("the OS provides randomness");
    bytes
}

/// Creates the data dir (mode 0700 when new).
pub fn ensure_dir(dir: &Path) -> Result<(), String> {
    if !dir.exists() {
        fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create data dir {}: {e}", dir.display()))?;
        fs::set_permissions(dir, fs::Permissions::from_mode(0o700))
            .map_err(|e| format!("cannot restrict {}: {e}", dir.display()))?;
    }
    Ok(())
}

/// Writes a new secret file, readable by its owner only. Refuses to overwrite.
pub fn write_secret(path: &Path, contents: &[u8]) -> Result<(), String> {
    let mut file = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| format!("cannot create {}: {e}", path.display()))?;
    file.write_all(contents)
        .and_then(|_| file.sync_all())
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
}

pub fn generate_signing_key() -> SigningKey {
    SigningKey::from_bytes(&random_bytes::<32>())
}

/// The key as PKCS#8 v1 PEM (RFC 8410: the private key alone), the form OpenSSL, Python's
/// `cryptography`, Node's `crypto` and Go's `x509` all read; v2 (RFC 5958, with the public key)
/// is refused by some of them. Both are read here.
pub fn signing_key_pem(key: &SigningKey) -> String {
    KeypairBytes {
        secret_key: key.to_bytes(),
        public_key: None,
    }
    .to_pkcs8_pem(LineEnding::LF)
    .expect("ed25519 keys encode as PKCS#8")
    .to_string()
}

/// Reads a PKCS#8 PEM ed25519 private key (as written by `perpsim keygen` and first start).
pub fn load_signing_key(path: &Path) -> Result<SigningKey, String> {
    let pem = fs::read_to_string(path)
        .map_err(|e| format!("cannot read key file {}: {e}", path.display()))?;
    SigningKey::from_pkcs8_pem(&pem).map_err(|e| {
        format!(
            "{} is not a PKCS#8 PEM ed25519 private key: {e}",
            path.display()
        )
    })
}

/// Reads the secret at `path`, creating it with `make` when missing. Returns its text.
fn load_or_create(path: &Path, make: impl FnOnce() -> String) -> Result<String, String> {
    if path.exists() {
        return fs::read_to_string(path)
            .map(|s| s.trim().to_owned())
            .map_err(|e| format!("cannot read {}: {e}", path.display()));
    }
    let value = make();
    write_secret(path, format!("{value}\n").as_bytes())?;
    tracing::info!(path = %path.display(), "secret written");
    Ok(value)
}

/// The admin token of the data dir's file, created on first start.
pub fn admin_token(dir: &Path) -> Result<String, String> {
    let path = dir.join(ADMIN_TOKEN_FILE);
    let token = load_or_create(&path, || hex(&random_bytes::<32>()))?;
    check_admin_token(&token, &path.display().to_string())
}

/// An admin token must be something a client can send as `Authorization: Bearer <token>`:
/// not empty, no whitespace or control characters (an empty token would start a server whose
/// admin API silently refuses everything). `source` names where it came from.
pub fn check_admin_token(token: &str, source: &str) -> Result<String, String> {
    if token.trim().is_empty() {
        return Err(format!(
            "the admin token from {source} is empty; give one, or leave it unset to use \
             <data-dir>/{ADMIN_TOKEN_FILE}"
        ));
    }
    if token.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(format!(
            "the admin token from {source} holds whitespace or control characters, which an \
             Authorization header cannot carry"
        ));
    }
    Ok(token.to_owned())
}

pub fn cursor_secret(dir: &Path) -> Result<[u8; 32], String> {
    let text = load_or_create(&dir.join(CURSOR_SECRET_FILE), || hex(&random_bytes::<32>()))?;
    let bytes: Vec<u8> = (0..text.len())
        .step_by(2)
        .map(|i| {
            text.get(i..i + 2)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        })
        .collect::<Option<_>>()
        .ok_or("cursor.secret is not hex")?;
    bytes
        .try_into()
        .map_err(|_| "cursor.secret must hold 32 bytes".to_owned())
}

/// The demo broker's key: the file if present (a user may bring their own), else a new one.
pub fn demo_key(dir: &Path) -> Result<SigningKey, String> {
    let path = dir.join(DEMO_KEY_FILE);
    if path.exists() {
        return load_signing_key(&path);
    }
    let key = generate_signing_key();
    write_secret(&path, signing_key_pem(&key).as_bytes())?;
    tracing::info!(path = %path.display(), "demo broker key written");
    Ok(key)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 23: a token no client could send is refused at start, naming where it came from.
    #[test]
    fn empty_or_whitespace_admin_tokens_are_refused_naming_their_source() {
        assert_eq!(
            check_admin_token("s3cr3t-t0ken", "--admin-token").unwrap(),
            "s3cr3t-t0ken"
        );
        for bad in ["", "   ", "\t\n"] {
            let e = check_admin_token(bad, "--admin-token").unwrap_err();
            assert!(e.contains("--admin-token") && e.contains("empty"), "{e}");
        }
        let e = check_admin_token("two words", "admin.toml").unwrap_err();
        assert!(e.contains("admin.toml") && e.contains("whitespace"), "{e}");
        let dir = tempfile::tempdir().unwrap();
        write_secret(&dir.path().join(ADMIN_TOKEN_FILE), b"\n").unwrap();
        let e = admin_token(dir.path()).unwrap_err();
        assert!(e.contains(ADMIN_TOKEN_FILE) && e.contains("empty"), "{e}");
    }

    #[test]
    fn keys_are_written_as_pkcs8_v1_and_v2_keys_are_still_read() {
        let key = generate_signing_key();
        let pem = signing_key_pem(&key);
        let der = ed25519_dalek::pkcs8::spki::der::pem::decode_vec(pem.as_bytes())
            .unwrap()
            .1;
        // v1 (RFC 8410): version 0 and no public key; 48 bytes in all.
        assert_eq!((der.len(), der[4]), (48, 0), "{pem}");
        assert_eq!(
            SigningKey::from_pkcs8_pem(&pem).unwrap().to_bytes(),
            key.to_bytes()
        );
        let v2 = key.to_pkcs8_pem(LineEnding::LF).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("v2.key");
        fs::write(&path, v2.as_bytes()).unwrap();
        assert_eq!(load_signing_key(&path).unwrap().to_bytes(), key.to_bytes());
    }

    #[test]
    fn secrets_are_owner_only_and_stable_across_reads() {
        let dir = tempfile::tempdir().unwrap();
        let token = admin_token(dir.path()).unwrap();
        assert_eq!(token.len(), 64);
        assert_eq!(admin_token(dir.path()).unwrap(), token);
        let mode = fs::metadata(dir.path().join(ADMIN_TOKEN_FILE))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        let key = demo_key(dir.path()).unwrap();
        assert_eq!(demo_key(dir.path()).unwrap().to_bytes(), key.to_bytes());
        assert_eq!(
            cursor_secret(dir.path()).unwrap(),
            cursor_secret(dir.path()).unwrap()
        );
        assert!(
            write_secret(&dir.path().join(ADMIN_TOKEN_FILE), b"x").is_err(),
            "never overwritten"
        );
    }
}
