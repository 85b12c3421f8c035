//! The emulated CloudStack version and the behaviours it switches (API.md §6).

use serde::{Deserialize, Serialize};
use std::fmt;

/// A CloudStack release such as `4.22.0.0`; only major and minor switch behaviour.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Version {
    /// The full dotted text reported by `listCapabilities` (`cloudstackversion`).
    pub text: String,
    /// Major number (4).
    pub major: u32,
    /// Minor number (22).
    pub minor: u32,
}

impl Version {
    /// Parses `4.22`, `4.22.0` or `4.22.0.0` (a `-SUFFIX` is kept in the text).
    pub fn parse(text: &str) -> Result<Self, String> {
        let core = text.split('-').next().unwrap_or_default();
        let mut parts = core.split('.');
        let number = |part: Option<&str>| -> Result<u32, String> {
            part.ok_or_else(|| format!("version {text:?}: expected MAJOR.MINOR"))?
                .parse::<u32>()
                .map_err(|_| format!("version {text:?}: not a dotted number"))
        };
        let major = number(parts.next())?;
        let minor = number(parts.next())?;
        let mut full: Vec<String> = core.split('.').map(str::to_owned).collect();
        while full.len() < 4 {
            full.push("0".into());
        }
        let suffix = text.strip_prefix(core).unwrap_or_default();
        Ok(Self {
            text: format!("{}{suffix}", full.join(".")),
            major,
            minor,
        })
    }

    /// True when this version is `major.minor` or newer.
    pub fn at_least(&self, major: u32, minor: u32) -> bool {
        (self.major, self.minor) >= (major, minor)
    }
}

impl Default for Version {
    fn default() -> Self {
        Self::parse("4.22.0.0").expect("valid default version")
    }
}

impl TryFrom<String> for Version {
    type Error = String;
    fn try_from(text: String) -> Result<Self, String> {
        Self::parse(&text)
    }
}

impl From<Version> for String {
    fn from(version: Version) -> String {
        version.text
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_short_and_long_forms() {
        let short = Version::parse("4.19").unwrap();
        assert_eq!(short.text, "4.19.0.0");
        assert!(short.at_least(4, 19) && !short.at_least(4, 20));
        let long = Version::parse("4.22.1.0-SNAPSHOT").unwrap();
        assert_eq!((long.major, long.minor), (4, 22));
        assert_eq!(long.text, "4.22.1.0-SNAPSHOT");
        assert!(Version::parse("four").is_err());
    }
}
