//! Public IP addresses (`listPublicIpAddresses`, `associateIpAddress`).

use super::de::response;
use super::tag::Tag;

response! {
    /// A public IP address.
    PublicIpAddress {
        /// Address id.
        id: Option<String>,
        /// The address.
        ipaddress: Option<String>,
        /// Allocation date; absent when the address is not allocated.
        allocated: Option<String>,
        /// State (`Allocating`, `Allocated`, `Releasing`, `Free`, `Reserved`).
        state: Option<String>,
        /// Source-NAT address of its network.
        issourcenat: Option<bool>,
        /// Static NAT enabled.
        isstaticnat: Option<bool>,
        /// System address.
        issystem: Option<bool>,
        /// Portable address.
        isportable: Option<bool>,
        /// For virtual networks.
        forvirtualnetwork: Option<bool>,
        /// Guest network it is associated with.
        associatednetworkid: Option<String>,
        /// Name of that network.
        associatednetworkname: Option<String>,
        /// Source public network id.
        networkid: Option<String>,
        /// VPC it is associated with.
        vpcid: Option<String>,
        /// VPC name.
        vpcname: Option<String>,
        /// Zone id.
        zoneid: Option<String>,
        /// Zone name.
        zonename: Option<String>,
        /// VLAN id.
        vlanid: Option<String>,
        /// VLAN name.
        vlanname: Option<String>,
        /// Static-NAT VM id.
        virtualmachineid: Option<String>,
        /// Static-NAT VM name.
        virtualmachinename: Option<String>,
        /// Static-NAT VM IP.
        vmipaddress: Option<String>,
        /// Purpose (`StaticNat`, `Lb`, …).
        purpose: Option<String>,
        /// Whether rules use the address.
        hasrules: Option<bool>,
        /// Shown to the user.
        fordisplay: Option<bool>,
        /// Physical network id.
        physicalnetworkid: Option<String>,
        /// Owning account.
        account: Option<String>,
        /// Owning domain id.
        domainid: Option<String>,
        /// Owning domain name.
        domain: Option<String>,
        /// Owning project id.
        projectid: Option<String>,
        /// Owning project name.
        project: Option<String>,
        /// Tags.
        tags: Vec<Tag>,
    }
}

impl PublicIpAddress {
    /// Whether the address is allocated to an account (`allocated` is set).
    pub fn is_allocated(&self) -> bool {
        is_allocated(self.allocated.as_deref())
    }

    /// Whether its association has not completed (state `Allocating`): CloudStack builds
    /// no rule on it (`IPAddressVO.readyToUse()`) and refuses to list its firewall rules.
    pub fn is_allocating(&self) -> bool {
        self.state
            .as_deref()
            .is_some_and(|state| state.eq_ignore_ascii_case("Allocating"))
    }
}

response! {
    /// The fields of a listed address that tell a free one: the address, its state and its
    /// allocation date. Decoding a list of a zone's pool into this type instead of
    /// [`PublicIpAddress`] keeps a page of hundreds of addresses small in memory.
    AddressSummary {
        /// The address.
        ipaddress: Option<String>,
        /// Allocation date; absent when the address is not allocated.
        allocated: Option<String>,
        /// State (`Allocating`, `Allocated`, `Releasing`, `Free`, `Reserved`).
        state: Option<String>,
    }
}

impl AddressSummary {
    /// Whether the address is allocated to an account (`allocated` is set).
    pub fn is_allocated(&self) -> bool {
        is_allocated(self.allocated.as_deref())
    }
}

/// Whether an allocation date says the address is allocated.
fn is_allocated(allocated: Option<&str>) -> bool {
    allocated.is_some_and(|date| !date.is_empty())
}
