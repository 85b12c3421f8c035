//! Reading annotations leniently: a bad value falls back (or keeps what was applied)
//! with a warning instead of failing the Service.

use super::*;

/// An annotation read where a fallback would open access: the value read, or "keep what
/// was last applied".
pub(super) enum Kept<T> {
    /// The value (or its absence) as read.
    Read(T),
    /// Unreadable: the value last applied stays.
    Applied,
}

/// Collects the annotation values replaced by a fallback, as warnings naming the
/// annotation, the value and what is used instead.
#[derive(Debug, Default)]
pub(super) struct Lenient {
    pub(super) warnings: Vec<String>,
}

impl Lenient {
    /// The value read, or `fallback` (described as `used`) when it is unreadable.
    pub(super) fn or<T>(&mut self, read: Result<T, AnnotationError>, fallback: T, used: &str) -> T {
        read.unwrap_or_else(|err| {
            self.warnings.push(format!("{err}; using {used} instead"));
            fallback
        })
    }

    /// The value read; when unreadable, the value last applied (`what`) if the load
    /// balancer was applied, else the error.
    pub(super) fn keep_applied<T>(
        &mut self,
        read: Result<T, AnnotationError>,
        applied: bool,
        what: &str,
    ) -> Result<Kept<T>, SpecError> {
        match read {
            Ok(value) => Ok(Kept::Read(value)),
            Err(err) if applied => {
                self.warnings.push(format!("{err}; keeping {what}"));
                Ok(Kept::Applied)
            }
            Err(err) => Err(err.into()),
        }
    }

    /// Warns when `ranges` admit no IPv4 client (the load balancer's address is IPv4).
    pub(super) fn warn_without_ipv4(&mut self, what: &str, ranges: &[Cidr]) {
        if !ranges.iter().any(|c| c.addr.is_ipv4()) {
            let listed: Vec<String> = ranges.iter().map(Cidr::to_string).collect();
            self.warnings.push(format!(
                "{what} {} hold no IPv4 range: the load balancer's IPv4 address accepts no client",
                listed.join(",")
            ));
        }
    }
}
