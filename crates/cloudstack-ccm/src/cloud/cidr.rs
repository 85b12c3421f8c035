//! [`Cidr`]: an address with a prefix length, as Services (source ranges), Nodes (pod
//! CIDRs) and CloudStack (`cidrlist` of rules, firewall rules and ACL items; VPC static
//! routes) write them.

use std::fmt;
use std::net::IpAddr;

/// A source CIDR: an address and a prefix length (a bare address is a single host).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Cidr {
    /// The address part, as written.
    pub addr: IpAddr,
    /// The prefix length.
    pub prefix: u8,
}

impl Cidr {
    /// True when `inner` lies inside this network (same address family).
    pub fn contains(&self, inner: &Cidr) -> bool {
        if self.prefix > inner.prefix {
            return false;
        }
        match (self.addr, inner.addr) {
            (IpAddr::V4(o), IpAddr::V4(i)) => {
                let mask = u32::MAX
                    .checked_shl(32 - u32::from(self.prefix))
                    .unwrap_or(0);
                u32::from(o) & mask == u32::from(i) & mask
            }
            (IpAddr::V6(o), IpAddr::V6(i)) => {
                let mask = u128::MAX
                    .checked_shl(128 - u32::from(self.prefix))
                    .unwrap_or(0);
                u128::from(o) & mask == u128::from(i) & mask
            }
            _ => false,
        }
    }

    /// True when the two networks overlap (one contains the other).
    pub(crate) fn overlaps(&self, other: &Cidr) -> bool {
        self.contains(other) || other.contains(self)
    }

    /// `0.0.0.0/0`, everything.
    pub(crate) const ANY_V4: Cidr = Cidr {
        addr: IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED),
        prefix: 0,
    };

    /// Parses `a.b.c.d/n`, `x::y/n` or a bare address.
    pub fn parse(text: &str) -> Option<Cidr> {
        let text = text.trim();
        let (addr, prefix) = match text.split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (text, None),
        };
        let addr: IpAddr = addr.parse().ok()?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            None => max,
            Some(p) if !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()) => {
                p.parse::<u8>().ok().filter(|p| *p <= max)?
            }
            Some(_) => return None,
        };
        Some(Cidr { addr, prefix })
    }

    /// Parses a CIDR list as CloudStack returns it: separated by commas and/or spaces.
    /// Entries that do not parse are skipped.
    pub(crate) fn parse_lenient_list(text: &str) -> Vec<Cidr> {
        text.split(|c: char| c == ',' || c.is_whitespace())
            .filter(|s| !s.is_empty())
            .filter_map(Cidr::parse)
            .collect()
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cidrs_parse_with_or_without_a_prefix() {
        assert_eq!(
            Cidr::parse(" 10.0.0.0/8 ").unwrap().to_string(),
            "10.0.0.0/8"
        );
        assert_eq!(Cidr::parse("192.168.1.1").unwrap().prefix, 32);
        assert_eq!(Cidr::parse("::1").unwrap().prefix, 128);
        for bad in ["10.0.0.0/33", "10.0.0.0/", "10.0.0.0/+8", "banana"] {
            assert_eq!(Cidr::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn lenient_lists_take_commas_and_spaces() {
        assert_eq!(
            Cidr::parse_lenient_list("10.0.0.0/8 1.2.3.4/32,::/0").len(),
            3
        );
    }

    #[test]
    fn containment_and_overlap() {
        let cidr = |text: &str| Cidr::parse(text).unwrap();
        assert!(cidr("10.244.0.0/16").contains(&cidr("10.244.3.0/24")));
        assert!(!cidr("10.244.3.0/24").contains(&cidr("10.244.0.0/16")));
        assert!(!cidr("10.245.0.0/16").contains(&cidr("10.244.3.0/24")));
        assert!(cidr("0.0.0.0/0").contains(&cidr("10.244.3.0/24")));
        assert!(cidr("fd00::/48").contains(&cidr("fd00:0:0:1::/64")));
        assert!(!cidr("fd00::/48").contains(&cidr("10.0.0.0/8")));
        assert!(cidr("10.244.3.0/24").overlaps(&cidr("10.244.0.0/16")));
        assert!(!cidr("10.244.3.0/24").overlaps(&cidr("10.244.4.0/24")));
    }
}
