//! The certificate and key PEMs of the unit tests: the simulator crate's fixtures under
//! `crates/cloudstack-sim/tests/fixtures/ssl` (its README says how they were made), loaded
//! in this one place.

/// `leaf-a-cert.pem`: `CN=shop.example.com`, signed by [`CA`], valid 100 years.
pub(crate) const LEAF_A: &str =
    include_str!("../../../../cloudstack-sim/tests/fixtures/ssl/leaf-a-cert.pem");
/// `leaf-a-key.pem`: the key of [`LEAF_A`], in PKCS#1.
pub(crate) const KEY_A: &str =
    include_str!("../../../../cloudstack-sim/tests/fixtures/ssl/leaf-a-key.pem");
/// `leaf-b-cert.pem`: the same name with another key (a renewal).
pub(crate) const LEAF_B: &str =
    include_str!("../../../../cloudstack-sim/tests/fixtures/ssl/leaf-b-cert.pem");
/// `leaf-b-key.pem`: the key of [`LEAF_B`], in PKCS#8.
pub(crate) const KEY_B: &str =
    include_str!("../../../../cloudstack-sim/tests/fixtures/ssl/leaf-b-key.pem");
/// `ca-cert.pem`: a self-signed CA, the chain of the leaves.
pub(crate) const CA: &str =
    include_str!("../../../../cloudstack-sim/tests/fixtures/ssl/ca-cert.pem");
/// `expired-cert.pem`: signed by [`CA`], valid 2020-01-01 to 2021-01-01.
pub(crate) const EXPIRED: &str =
    include_str!("../../../../cloudstack-sim/tests/fixtures/ssl/expired-cert.pem");
/// `expired-key.pem`: the key of [`EXPIRED`].
pub(crate) const EXPIRED_KEY: &str =
    include_str!("../../../../cloudstack-sim/tests/fixtures/ssl/expired-key.pem");
/// `ec-key.pem`: a P-256 key in SEC1: matches none of the certificates.
pub(crate) const EC_KEY: &str =
    include_str!("../../../../cloudstack-sim/tests/fixtures/ssl/ec-key.pem");

/// The text of fixture file `name` (e.g. `leaf-a-cert.pem`); panics on a name that is not
/// a fixture.
pub(crate) fn ssl_fixture(name: &str) -> &'static str {
    match name {
        "leaf-a-cert.pem" => LEAF_A,
        "leaf-a-key.pem" => KEY_A,
        "leaf-b-cert.pem" => LEAF_B,
        "leaf-b-key.pem" => KEY_B,
        "ca-cert.pem" => CA,
        "expired-cert.pem" => EXPIRED,
        "expired-key.pem" => EXPIRED_KEY,
        "ec-key.pem" => EC_KEY,
        other => panic!("no SSL fixture {other:?}"),
    }
}
