//! Virtual machines (`listVirtualMachines`, `listLoadBalancerRuleInstances`) and their NICs.

use super::de::response;
use super::tag::Tag;

response! {
    /// A secondary IP address of a NIC.
    NicSecondaryIp {
        /// Secondary IP id.
        id: Option<String>,
        /// The address.
        ipaddress: Option<String>,
    }
}

response! {
    /// A network interface of a VM.
    Nic {
        /// NIC id.
        id: Option<String>,
        /// Network the NIC is attached to.
        networkid: Option<String>,
        /// Name of that network.
        networkname: Option<String>,
        /// IPv4 address.
        ipaddress: Option<String>,
        /// IPv4 netmask.
        netmask: Option<String>,
        /// IPv4 gateway.
        gateway: Option<String>,
        /// MAC address.
        macaddress: Option<String>,
        /// Whether this is the VM's default NIC.
        isdefault: Option<bool>,
        /// Traffic type (`Guest`).
        traffictype: Option<String>,
        /// Guest network type (`Isolated`, `Shared`, `L2`).
        r#type: Option<String>,
        /// IPv6 address.
        ip6address: Option<String>,
        /// IPv6 gateway.
        ip6gateway: Option<String>,
        /// IPv6 CIDR.
        ip6cidr: Option<String>,
        /// Broadcast URI.
        broadcasturi: Option<String>,
        /// Isolation URI.
        isolationuri: Option<String>,
        /// Device number.
        deviceid: Option<String>,
        /// VPC of the network, if any.
        vpcid: Option<String>,
        /// VPC name.
        vpcname: Option<String>,
        /// Secondary IPs.
        secondaryip: Vec<NicSecondaryIp>,
    }
}

response! {
    /// A virtual machine.
    VirtualMachine {
        /// VM id.
        id: Option<String>,
        /// Host name of the guest.
        name: Option<String>,
        /// Display name.
        displayname: Option<String>,
        /// Internal instance name (root admin only).
        instancename: Option<String>,
        /// State (`Running`, `Stopped`, …).
        state: Option<String>,
        /// Zone id.
        zoneid: Option<String>,
        /// Zone name.
        zonename: Option<String>,
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
        /// Hypervisor type.
        hypervisor: Option<String>,
        /// Hypervisor host id (admin only).
        hostid: Option<String>,
        /// Hypervisor host name (admin only; not the guest host name).
        hostname: Option<String>,
        /// Service offering id (`details` incl. `servoff`).
        serviceofferingid: Option<String>,
        /// Service offering name (`details` incl. `servoff`).
        serviceofferingname: Option<String>,
        /// Number of CPUs.
        cpunumber: Option<u32>,
        /// CPU speed in MHz.
        cpuspeed: Option<u32>,
        /// Memory in MiB.
        memory: Option<u64>,
        /// Template id.
        templateid: Option<String>,
        /// Template name.
        templatename: Option<String>,
        /// OS display name.
        osdisplayname: Option<String>,
        /// Creation date.
        created: Option<String>,
        /// HA enabled.
        haenable: Option<bool>,
        /// Static-NAT public IP, if any.
        publicip: Option<String>,
        /// Static-NAT public IP id, if any.
        publicipid: Option<String>,
        /// Service state (LB rule instances).
        servicestate: Option<String>,
        /// Pending job id on this VM.
        jobid: Option<String>,
        /// Pending job status.
        jobstatus: Option<i64>,
        /// Owning user id.
        userid: Option<String>,
        /// Owning user name.
        username: Option<String>,
        /// NICs (`details` incl. `nics`).
        nic: Vec<Nic>,
        /// Tags.
        tags: Vec<Tag>,
        /// VM details map.
        details: Option<serde_json::Value>,
    }
}

response! {
    /// The NIC fields the controller manager reads (see [`VmSummary`]).
    NicSummary {
        /// Network the NIC is attached to.
        networkid: Option<String>,
        /// IPv4 address.
        ipaddress: Option<String>,
        /// IPv6 address.
        ip6address: Option<String>,
        /// Whether this is the VM's default NIC.
        isdefault: Option<bool>,
    }
}

response! {
    /// The fields of a listed VM the controller manager reads (node lookups and the
    /// VM → network map of load balancers). Decoding a list into this type instead of
    /// [`VirtualMachine`] keeps a list of thousands of VMs small in memory.
    VmSummary {
        /// VM id.
        id: Option<String>,
        /// Host name of the guest.
        name: Option<String>,
        /// State (`Running`, `Stopped`, …).
        state: Option<String>,
        /// Zone name.
        zonename: Option<String>,
        /// Service offering name (`details` incl. `servoff`).
        serviceofferingname: Option<String>,
        /// Static-NAT public IP, if any.
        publicip: Option<String>,
        /// NICs (`details` incl. `nics`).
        nic: Vec<NicSummary>,
    }
}

impl VmSummary {
    /// The NIC marked `isdefault=true` (NIC order is not guaranteed, so never assume `nic[0]`).
    pub fn default_nic(&self) -> Option<&NicSummary> {
        self.nic.iter().find(|nic| nic.isdefault == Some(true))
    }
}

response! {
    /// A listed VM reduced to its id (the members of a load-balancer rule, where only
    /// the ids matter).
    VmId {
        /// VM id.
        id: Option<String>,
    }
}

impl VirtualMachine {
    /// The NIC marked `isdefault=true` (NIC order is not guaranteed, so never assume `nic[0]`).
    pub fn default_nic(&self) -> Option<&Nic> {
        self.nic.iter().find(|nic| nic.isdefault == Some(true))
    }
}
