//! Request signing exactly as CloudStack's `ApiServer.verifyRequest` recomputes it.
//!
//! Values are encoded with Java `URLEncoder` rules (`A-Z a-z 0-9 . - * _` unchanged, space as
//! `%20`, everything else as `%XX` of its UTF-8 bytes, so `~` becomes `%7E`); names are sorted
//! by their bytes and left unencoded; the joined string is lower-cased and signed with
//! HMAC-SHA1; the signature is the standard base64 of the digest.

use base64::Engine as _;
use hmac::{Hmac, KeyInit, Mac};
use sha1::Sha1;

/// Encodes one parameter value the way Java's `URLEncoder.encode(v, "UTF-8")` does,
/// followed by the server's `+` → `%20` replacement.
pub fn encode_value(value: &str) -> String {
    let mut out = String::with_capacity(value.len() * 3);
    for byte in value.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'.' | b'-' | b'*' | b'_' => {
                out.push(byte as char)
            }
            b' ' => out.push_str("%20"),
            other => {
                out.push('%');
                out.push(hex_digit(other >> 4));
                out.push(hex_digit(other & 0x0f));
            }
        }
    }
    out
}

/// Upper-case hexadecimal digit for a nibble.
fn hex_digit(nibble: u8) -> char {
    char::from(b"0123456789ABCDEF"[usize::from(nibble)])
}

/// Builds the canonical string that is signed: parameters sorted by name (byte order, which
/// equals Java `String.compareTo` for ASCII names), `name=encoded value` joined with `&`,
/// lower-cased. A parameter named `signature` (any case) is skipped.
pub fn canonical_string<'a, I>(params: I) -> String
where
    I: IntoIterator<Item = (&'a str, &'a str)>,
{
    let mut pairs: Vec<(&str, &str)> = params
        .into_iter()
        .filter(|(name, _)| !name.eq_ignore_ascii_case("signature"))
        .collect();
    pairs.sort_by(|a, b| a.0.cmp(b.0));
    let joined = pairs
        .iter()
        .map(|(name, value)| format!("{name}={}", encode_value(value)))
        .collect::<Vec<_>>()
        .join("&");
    joined.to_lowercase()
}

/// Signs a canonical string with the secret key: base64(HMAC-SHA1(secret, canonical)).
pub fn sign_canonical(secret: &str, canonical: &str) -> String {
    let mut mac = <Hmac<Sha1> as KeyInit>::new_from_slice(secret.as_bytes())
        .expect("HMAC accepts keys of any length");
    mac.update(canonical.as_bytes());
    base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes())
}

/// Computes the signature of a parameter set (all parameters except `signature`).
pub fn signature<'a, I>(secret: &str, params: I) -> String
where
    I: IntoIterator<Item = (&'a str, &'a str)>,
{
    sign_canonical(secret, &canonical_string(params))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn java_urlencoder_rules() {
        assert_eq!(encode_value("aZ09.-*_"), "aZ09.-*_");
        assert_eq!(encode_value("a b"), "a%20b");
        assert_eq!(encode_value("~!'(),/:+"), "%7E%21%27%28%29%2C%2F%3A%2B");
        assert_eq!(encode_value("ü"), "%C3%BC");
    }

    /// The vectors of `signing-test-vectors.json` (A, B, D): canonical string and signature.
    #[test]
    fn signing_test_vectors() {
        let file: serde_json::Value =
            serde_json::from_str(include_str!("../tests/fixtures/signing-test-vectors.json"))
                .unwrap();
        let secret = file["secret"].as_str().unwrap();
        let vectors = file["vectors"].as_array().unwrap();
        assert_eq!(vectors.len(), 3);
        for vector in vectors {
            let params: Vec<(&str, &str)> = vector["params"]
                .as_object()
                .unwrap()
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str().unwrap()))
                .collect();
            let name = vector["name"].as_str().unwrap();
            assert_eq!(
                canonical_string(params.iter().copied()),
                vector["canonical"].as_str().unwrap(),
                "vector {name}"
            );
            assert_eq!(
                signature(secret, params.iter().copied()),
                vector["signature"].as_str().unwrap(),
                "vector {name}"
            );
        }
    }

    /// Vector C (API.md §1.3): `~`, `*`, `+`, quotes and brackets in a value.
    #[test]
    fn vector_c_canonical_string() {
        let params = [
            ("apikey", "TESTAPIKEY-abc_123"),
            ("command", "createLoadBalancerRule"),
            ("response", "json"),
            ("name", "a1b2c3-tcp-80 x"),
            ("algorithm", "roundrobin"),
            ("privateport", "30080"),
            ("publicport", "80"),
            ("cidrlist", "10.0.0.0/8,192.168.1.0/24"),
            ("protocol", "tcp-proxy"),
            ("description", "k8s svc ns/name ~*+:;'!()"),
            ("signatureversion", "3"),
            ("expires", "2030-01-01T00:00:00+0000"),
        ];
        let expected = "algorithm=roundrobin&apikey=testapikey-abc_123&cidrlist=10.0.0.0%2f8%2c192.168.1.0%2f24&command=createloadbalancerrule&description=k8s%20svc%20ns%2fname%20%7e*%2b%3a%3b%27%21%28%29&expires=2030-01-01t00%3a00%3a00%2b0000&name=a1b2c3-tcp-80%20x&privateport=30080&protocol=tcp-proxy&publicport=80&response=json&signatureversion=3";
        let canonical = canonical_string(params);
        assert_eq!(canonical, expected);
        assert_eq!(
            sign_canonical("TestSecret-XyZ_987", &canonical),
            signature("TestSecret-XyZ_987", params)
        );
    }

    #[test]
    fn canonical_skips_signature_and_sorts_case_sensitively() {
        let canonical = canonical_string([("b", "1"), ("Signature", "x"), ("Z", "2"), ("a", "3")]);
        assert_eq!(canonical, "z=2&a=3&b=1");
    }
}
