//! CloudStack server versions (`listCapabilities` → `cloudstackversion`).

use std::cmp::Ordering;
use std::fmt;
use std::str::FromStr;

/// A CloudStack version such as `4.15.2.0` or `4.22.0.0-SNAPSHOT`. Equality and ordering use
/// the first three numbers only (`4.18.0.0` == `4.18.0.1`); the original text is kept for
/// display.
#[derive(Debug, Clone)]
pub struct ServerVersion {
    major: u32,
    minor: u32,
    patch: u32,
    text: String,
}

/// A version string that is not `N.N[.N[.N]][-suffix]`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid CloudStack version {0:?}: expected numbers like 4.18.0.0")]
pub struct ParseVersionError(pub String);

impl ServerVersion {
    /// A version from its first three numbers.
    pub fn new(major: u32, minor: u32, patch: u32) -> Self {
        Self {
            major,
            minor,
            patch,
            text: format!("{major}.{minor}.{patch}"),
        }
    }

    /// Major number (4).
    pub fn major(&self) -> u32 {
        self.major
    }

    /// Minor number (e.g. 18).
    pub fn minor(&self) -> u32 {
        self.minor
    }

    /// Patch number.
    pub fn patch(&self) -> u32 {
        self.patch
    }

    /// Whether this version is `major.minor.patch` or newer.
    pub fn at_least(&self, major: u32, minor: u32, patch: u32) -> bool {
        self.key() >= (major, minor, patch)
    }

    /// The comparison key.
    fn key(&self) -> (u32, u32, u32) {
        (self.major, self.minor, self.patch)
    }
}

impl FromStr for ServerVersion {
    type Err = ParseVersionError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let invalid = || ParseVersionError(text.to_owned());
        let trimmed = text.trim();
        let numeric = trimmed.split(['-', '+', ' ']).next().unwrap_or_default();
        let numbers = numeric
            .split('.')
            .map(|part| part.parse::<u32>().map_err(|_| invalid()))
            .collect::<Result<Vec<_>, _>>()?;
        if numbers.len() < 2 || numbers.len() > 4 {
            return Err(invalid());
        }
        Ok(Self {
            major: numbers[0],
            minor: numbers[1],
            patch: numbers.get(2).copied().unwrap_or(0),
            text: trimmed.to_owned(),
        })
    }
}

impl fmt::Display for ServerVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl PartialEq for ServerVersion {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key()
    }
}

impl Eq for ServerVersion {}

impl PartialOrd for ServerVersion {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for ServerVersion {
    fn cmp(&self, other: &Self) -> Ordering {
        self.key().cmp(&other.key())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_orders() {
        let v415: ServerVersion = "4.15.2.0".parse().unwrap();
        let v422: ServerVersion = "4.22.0.0-SNAPSHOT".parse().unwrap();
        assert_eq!((v415.major(), v415.minor(), v415.patch()), (4, 15, 2));
        assert!(v415 < v422);
        assert!(v422.at_least(4, 22, 0) && !v415.at_least(4, 18, 0));
        assert_eq!(v422.to_string(), "4.22.0.0-SNAPSHOT");
        assert_eq!(
            "4.18.0.0".parse::<ServerVersion>().unwrap(),
            "4.18.0.7".parse().unwrap()
        );
        assert_eq!(
            "4.22".parse::<ServerVersion>().unwrap(),
            ServerVersion::new(4, 22, 0)
        );
        assert!("".parse::<ServerVersion>().is_err());
        assert!("four.two".parse::<ServerVersion>().is_err());
    }
}
