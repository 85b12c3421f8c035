//! A simulator of the Apache CloudStack management-server API for the subset a Kubernetes
//! cloud controller manager uses: real HTTP, real signature checks, the server's envelopes,
//! errors and paging, async jobs serialised per network, a version knob, rate limiting,
//! fault injection and introspection under `/sim/…`.
//!
//! # Fidelity: where each behaviour comes from
//!
//! Every rule below follows Apache CloudStack's source (class and method named); where the
//! source and `cloudstack-api/API.md` disagree, the source wins.
//!
//! **Authentication first.** `ApiServer.verifyRequest` runs before anything else: a request
//! without a command or naming a command the server does not have (also one newer than the
//! emulated version) is a 401 "unable to verify user credentials and/or request signature"
//! keyed `errorresponse` (`ApiServer.getSerializedApiError`), whatever its signature.
//!
//! **Roles before the signature** ([`roles`]; `ApiServer.verifyRequest` →
//! `checkCommandAvailable`). Once the API key names an account (an unknown key: 401), its
//! role decides — still before the signature is verified: a root admin may call everything,
//! the default User role everything but the admin-only commands
//! (`listManagementServersMetrics`), a custom role (`[[role]]`, an account's `custom_role`)
//! by its first matching rule, else by the command's `@APICommand(authorized = …)`
//! (`DynamicRoleBasedAPIAccessChecker`). A refusal is 432, `cserrorcode` 9999, under
//! `errorresponse` whatever the command: `The API [<cmd>] does not exist or is not
//! available for the account for user id [<user uuid>].` (from 4.23 "… for the account
//! `<name>`."); so is a `projectid` naming a project the caller is no member of (`… for
//! this account/user in project [<uuid>].`, `ProjectRoleBasedApiAccessChecker`). Then a
//! bad signature is 401. `listApis` lists only what the caller may call
//! (`ApiDiscoveryServiceImpl.listApis`); with the `name` of a refused or unknown command it
//! is 530. [`Scenario::cks_project`] has the keys CloudStack Kubernetes Service gives a
//! project cluster: the "Project Kubernetes Service Role" ([`CKS_PROJECT_ROLE_APIS`], then
//! `*` DENY).
//!
//! **A hidden version.** [`Settings::expose_version_in_capabilities`]
//! (`expose.cloudstack.version.api.list.capabilities`) off: `listCapabilities` has no
//! `cloudstackversion`. [`Settings::expose_version_in_xml`]
//! (`expose.cloudstack.version.api.xml.response`) on, the default: every XML reply to a
//! caller whose signature was verified has `cloud-stack-version="<version>"` on its root
//! element (`ApiResponseSerializer.toXMLSerializedString`); refusals decided before the
//! signature and 401s have none.
//!
//! **CloudStack's listing.** Every command's parameters are those of CloudStack's own API
//! listing (`api/listing.json`, `listApis` of the 4.22 era, with the corrections its
//! `corrections` key names — `disassociateIpAddress` takes `id` or `ipaddress`; see
//! [`listing`]): parameter processing walks the command's `@Parameter` fields in
//! declaration order, binding as it goes ([`binding`], `ParamProcessWorker
//! .processParameters`) — a required one missing is the dispatcher's 431 "Unable to execute
//! API command `<command>` due to missing parameter `<name>`", an unknown UUID the 431
//! "invalid value. Invalid parameter …", whichever field comes first; a value sent empty is
//! present — before any check of the command; a
//! name the command does not declare is ignored, as the server ignores it, and recorded in
//! the call log (`unknown_params`); a handler that reads an undeclared name fails in debug
//! builds. Preconditions that live in service code name their Java method (e.g.
//! `listSslCerts` before 4.24: one of `certid`, `lbruleid`, `projectid`, `accountid`).
//!
//! **Synchronous part vs job.** `ApiServer.queueCommand` runs only parameter processing
//! before queueing a non-create async command (`ParamProcessWorker`): UUID parameters are
//! resolved — removed rows included (`translateUuidToInternalId` searches them), so an id
//! that names nothing is a 431 — and `@ACL` parameters are access-checked (531; `id` of
//! destroyVirtualMachine, expungeVirtualMachine, deleteFirewallRule). The rest runs in the
//! job, where `ApiAsyncJobDispatcher.runJob` reports an `InvalidParameterValueException` as
//! 431 and any other exception as 530 with its message:
//! * assign/removeFromLoadBalancerRule, updateLoadBalancerRule, deleteLoadBalancerRule check
//!   the caller's access to the rule in the job (530);
//! * assignToLoadBalancerRule: every failure of `LoadBalancingRulesManagerImpl
//!   .assignToLoadBalancer` (another account's VM via `RulesManagerImpl.checkRuleAndUserVm`,
//!   a Destroyed VM, no NIC in the network, already mapped) → 530 "Failed to assign load
//!   balancer rule" (`AssignToLoadBalancerRuleCmd.execute`);
//! * removeFromLoadBalancerRule: a VM that is not mapped (or expunged) is left alone and the
//!   job succeeds (`removeFromLoadBalancerInternal`: `listByLoadBalancerIdAndVmId` is never
//!   null); an unmapped `vmidipmap` address → 431 "Failed to remove Instance from load
//!   balancer rule" (`RemoveFromLoadBalancerRuleCmd.execute`);
//! * updateLoadBalancerRule (`LoadBalancingRulesManagerImpl.updateLoadBalancerRule`): a
//!   provider-refused change → 431 "Modifications in lb rule … are not supported." (the
//!   algorithm is not validated: the Virtual Router's `validateHAProxyLBRule` takes any, the
//!   NetScaler's `validateLBRule` refuses an unknown one), `cidrlist` stored comma-joined;
//! * createTags/deleteTags (`TaggedResourceManagerImpl`): bad resource type or resource,
//!   empty value, nothing to delete → 431; another account's resource, a key already on
//!   the resource (`"tag K already on <Type> with id <id>"`) → 530;
//! * disassociateIpAddress (`NetworkServiceImpl.releaseIpAddressInternal`): an address no
//!   longer allocated → success; a source-NAT address → 530; before the job, neither `id`
//!   nor `ipaddress` is 431 cs 4350 "Please specify either IP address or IP address ID"
//!   (`DisassociateIPAddrCmd.getIpAddressId` from `doAccessChecks`);
//! * associateIpAddress with a VPC tier's `networkid` → 431 "…Specify vpcId to associate ip
//!   address to VPC" (`NetworkServiceImpl.associateIPToNetwork`), the address released;
//!   otherwise the job binds the network (`associateIPToGuestNetwork`): while `Allocating`
//!   the address has no `associatednetworkid`, a firewall rule on it is
//!   `CreateFirewallRuleCmd.getNetworkId`'s 431 cs 4350, a load-balancer rule
//!   `CreateLoadBalancerRuleCmd.getSourceIpAddressId`'s (from `doAccessChecks`, not
//!   `readyToUse()`), 431 cs 4350.
//!
//! **Codes of synchronous failures** (`CSExceptionErrorCode`): a `ServerApiException` thrown
//! bare is cs 9999 (parameter processing's missing and invalid values); an
//! `InvalidParameterValueException` reaching `ApiServer` is 431 cs 4350; a
//! `CloudRuntimeException` 530 cs 4250 with its text for a root admin only
//! ([`error::ApiError::cloud_runtime`], e.g. a plain firewall rule on a ROUTED network);
//! `new CloudRuntimeException(e)` 530 cs 0 ([`error::ApiError::wrapped`]);
//! `UnsupportedServiceException` 530 cs 4390.
//!
//! **Reads.** `listAccounts` follows `QueryManagerImpl.searchForAccountsInternal`: a user
//! naming another account's `id` is 531 (`checkAccess`), `name` narrows the caller's own
//! account, an admin without `listall` sees its own; each account carries its `user` list
//! (`AccountJoinDaoImpl.newAccountResponse`). `listFirewallRules` lists routing firewall
//! rules too (one `firewall_rules` table) and, like `listRoutingFirewallRules`, newest first
//! (`FirewallManagerImpl.listFirewallRules`). A VM's `instancename` is
//! `i-<account id>-<vm id>-VM` (`VirtualMachineName.getVmName`), unique. An internal load
//! balancer's `fordisplay` is shown to root admins only (`@Param(authorized = Admin)`).
//!
//! **Network kinds** ([`NetworkSpec`]: `network_mode`, `guest_type`, `lb_provider`;
//! [`state::Network::services`]; `commands/infra.rs` renders them). A network has the
//! services of its offering and nothing else, and every command asks the network, as the
//! server's `NetworkModel.areServicesSupportedInNetwork` does:
//! * ROUTED (4.20+): Dhcp, Dns, UserData and Firewall (isolated) or NetworkACL (tier) —
//!   "SourceNat/StaticNat/Lb/PortForwarding/Vpn service are not supported in ROUTED mode"
//!   (`createNetworkOffering`); `listNetworks` shows `ip4routing: Static` and `ip4routes`
//!   `[{subnet, gateway}]`, the gateway being the router's public address (the address
//!   flagged source NAT of the network, or of its VPC). `associateIpAddress networkid=` of
//!   a ROUTED isolated network answers `{id, jobid}` and the job fails 431 "In zone of type
//!   Advanced ip address can be associated only to the network of guest type Isolated with
//!   the SourceNat enabled" (`IpAddressManagerImpl.associateIPToGuestNetwork`), the address
//!   released; the same refusal meets a VPC address's first load-balancer (431, cs 9999)
//!   or port-forwarding rule (431, cs 4350) naming a ROUTED tier. Routing firewall rules
//!   (`create`/`list`/`deleteRoutingFirewallRule`, `RoutedIpv4ManagerImpl`) filter the
//!   routed subnet of an isolated network.
//! * Shared (`DefaultSharedNetworkOffering`): `type: Shared`, Dhcp, Dns, UserData;
//!   `associateIpAddress networkid=` is a synchronous 431 "Associate IP address can only be
//!   called on the shared networks in the advanced zone with Firewall/Source Nat/Static
//!   Nat/Port Forwarding/Load balancing services enabled" (`NetworkServiceImpl.allocateIP`).
//! * A load-balancer rule on an address of a network without Lb: "LB service is not
//!   supported in specified network id" (`isLbServiceSupportedInNetwork`, 431, cs 9999) —
//!   unless the address is the network's source-NAT address, where
//!   `NetworkModelImpl.checkIpForService` finds no Lb provider first and the create ends in
//!   530 "Failed to create load balancer rule: `<name>`" (root admins; others the generic
//!   text).
//! * NSX and Netris (`NsxElement`, `NetrisElement.initCapabilities`) provide Lb, the NAT
//!   services and Firewall/NetworkACL on their networks: algorithms `roundrobin,leastconn`,
//!   protocols `tcp, udp`, the HAProxy stickiness methods, schemes `Internal,Public`, no
//!   `HealthCheckPolicy` (createLBHealthCheckPolicy refused as on the Virtual Router), no
//!   `SslTermination` (assignCertToLoadBalancer refused); their `validateLBRule` accepts every
//!   rule. A stickiness policy is stored and applies to nothing. On Netris,
//!   `updateLoadBalancerRule` refuses any `algorithm` and `protocol=tcp-proxy` in the job
//!   (`validateInputsForExternalNetworkProvider`, 431). A `protocol=udp` rule on Netris is
//!   created and lists `udp`: the response shows the rule's `lbProtocol`, while the Netris
//!   element builds its L4LB from `getProtocol()`, which `CreateLoadBalancerRuleCmd` fixes to
//!   `tcp` — the listener would be TCP, which no API answer shows.
//! * VPC Internal Load Balancer ([`LbProvider::InternalLbVm`], VPC tiers only; offering
//!   `DefaultIsolatedNetworkOfferingForVpcNetworksWithInternalLB`: Lb by `InternalLbVm`
//!   with `LbSchemes` `Internal`, SourceNat, Dhcp, Dns, UserData and NetworkACL by the VPC
//!   Virtual Router — no PortForwarding, no StaticNat: `internalLbOffProviders`). A public
//!   load-balancer rule on such a tier is refused by `isLbServiceSupportedInNetwork(…,
//!   Public)`: 431 "Scheme Public is not supported by the network offering NetworkOffering
//!   {…}" (cs 9999 through `CreateLoadBalancerRuleCmd.create`). Internal rules
//!   (`createLoadBalancer`/`listLoadBalancers`/`deleteLoadBalancer`, `commands/internal_lb.rs`,
//!   `ApplicationLoadBalancerManagerImpl`) live in [`state::State::internal_lb_rules`] and
//!   never show in `listLoadBalancerRules`; a new rule takes a free guest address of the
//!   source network or shares a `sourceipaddress` other rules use (an overlapping source
//!   port there: 537); members (`assign`/`removeFromLoadBalancerRule`), tags of type
//!   `LoadBalancer`, `listLoadBalancerRuleInstances` and `deleteLoadBalancerRule` take an
//!   internal rule's id as a public one's (one `load_balancing_rules` table). The create
//!   job has no network queue (`CreateApplicationLoadBalancerCmd` has no sync object); the
//!   delete job waits in its network's. A rule stays `Add` until applied with a VM.
//!
//! **VM lifecycle** (`UserVmManagerImpl.destroyVm`, `expungeVm`, `expunge` →
//! `cleanupVmResources`): destroy without expunge only moves the VM to Destroyed — its
//! `LoadBalancerVMMapVO` rows, static NAT and NICs stay, and `listLoadBalancerRuleInstances`
//! skips it (`listLoadBalancerInstances`); expunge (admin only, "Account does not have
//! permission for expunging.") drops the mappings (`removeVmFromLoadBalancers`), disables
//! static NAT, releases the NICs, deletes the tags and marks the row removed. The `/sim`
//! equivalents: `DELETE /sim/vms/{id}` expunges, `POST /sim/vms/{id}/destroy` destroys.
//! Without `state`, `listVirtualMachines` shows Destroyed VMs to admins only
//! (`QueryManagerImpl.searchForUserVMsInternal`, `allow.user.view.destroyed.vm` off).
//!
//! **Scoping** (`AccountManagerImpl.buildACLSearchParameters`): project resources only with
//! `projectid`, whatever `id`, `ipaddressid`, `publicipid` or `resourceid` say; a root admin
//! listing by `id` sees the resource whoever owns it. `listFirewallRules ipaddressid=` of an
//! address that is not allocated → 431 (`FirewallManagerImpl.listFirewallRules`).
//!
//! **Conflicts** (`FirewallManagerImpl.detectRulesConflict`, create phase): firewall rules
//! conflict only with the same protocol, overlapping ports and a source CIDR string both
//! lists contain (537; ICMP duplicates 431); the `openfirewall` rule is checked like any
//! firewall rule; a load-balancer rule conflicts with any load-balancer or port-forwarding
//! rule on its port whatever the protocols, two port-forwarding rules only with the same
//! protocol (`allowPf`).
//!
//! **VPC address tiers** (`associateIPToGuestNetwork`, `unassignIPFromVpcNetwork`): a VPC
//! address's first load-balancer or port-forwarding rule associates it with the tier the
//! rule names; rules on it then go to that tier. It leaves the tier when a removed rule is
//! applied and neither static NAT nor any rule is left on it (`isIpAllocatedToVpc`): the
//! delete jobs of load-balancer, port-forwarding and firewall rules, an expunged VM's
//! forwarding rules and static NAT, a port-forwarding create whose job failed — but not a
//! load-balancer create whose job failed (`deleteLoadBalancerRule(id, false)` applies
//! nothing).
//!
//! **Create-phase codes.** `CreateLoadBalancerRuleCmd.create` rethrows every
//! `InvalidParameterValueException` (431), `NetworkRuleConflictException` (537) and
//! `InsufficientAddressCapacityException` of its create phase as a `ServerApiException`
//! without the cause, so they carry `cserrorcode` 9999; so do `CreateFirewallRuleCmd.create`'s
//! CIDR error and `BaseListCmd.validateSpecificParameters`' page/pagesize errors (where a
//! blank `page=` with a `pagesize` is the first page). A static-NAT address refuses a
//! load-balancer rule with 537 ("Can't do load balance on ip address", from
//! `createPublicLoadBalancerRule`) and a port-forwarding rule with 431/4350
//! (`RulesManagerImpl.createPortForwardingRule`). `listAsyncJobs` lists oldest first,
//! `listNetworkACLs` newest first (both by `id`).
//!
//! **Rule state** (`LoadBalancingRulesManagerImpl.applyLoadBalancerRules`): a load-balancer
//! rule is `Add` after its create job (`CreateLoadBalancerRuleCmd.execute` applies only the
//! firewall rules), `Active` once applied with at least one VM mapped (assign, remove, an
//! algorithm or protocol update, a policy created or deleted, a member VM expunged all
//! apply), and back to `Add` when applied with none.
//!
//! **Jobs and queues** (`BaseAsyncCmd.networkSyncObject`, `AsyncJobManagerImpl`): jobs on
//! one network run one at a time; a VM carries the
//! `jobid`/`jobstatus` of its pending job (`UserVmJoinDaoImpl`); a job that never finishes
//! (the `hung_networks` fault: a hung virtual router) holds its network's queue until
//! `job.cancel.threshold.minutes` cancels it ("Job is cancelled as it has been blocking
//! others for too long", result code 0), without undoing its create phase.
//!
//! **SSL certificates** (`CertServiceImpl`, `LoadBalancingRulesManagerImpl`; `certs.rs` and
//! `commands/ssl_certs.rs`): `uploadSslCert`, `listSslCerts` and `deleteSslCert` are
//! synchronous, every upload failure a 530 with the validation message (none for a
//! certificate that is not PEM: `Preconditions.checkNotNull`'s message-less exception);
//! `ListSslCertsCmd`/`DeleteSslCertCmd.execute` wrap every failure, access refusals
//! included, in `new CloudRuntimeException(e)` (530 cs 0, the message for a root admin
//! only); an assigned certificate cannot be deleted; `assignCertToLoadBalancer` and
//! `removeCertFromLoadBalancer` are jobs queued on the rule's network with every check
//! inside the job (nothing bound: 431 from 4.22); `sslcert` has no `domainpath`. The Virtual
//! Router advertises `SslTermination` from 4.22 (apache/cloudstack#11468), NetScaler always;
//! certificates are not a taggable resource type.
//!
//! ```no_run
//! # async fn demo() -> Result<(), cloudstack_sim::SimError> {
//! let sim = cloudstack_sim::SimServer::start(cloudstack_sim::Scenario::small()).await?;
//! println!("{}", sim.api_url());
//! # Ok(()) }
//! ```

#![warn(missing_docs)]

mod admin;
pub mod binding;
mod build_state;
mod cert_chain;
pub mod certs;
pub mod commands;
pub mod error;
pub mod faults;
mod http_api;
mod job_lifecycle;
pub mod jobs;
pub mod listing;
pub mod params;
pub mod response;
pub mod roles;
pub mod scenario;
mod scenario_cks;
mod scenario_kinds;
mod scenario_small;
mod server;
mod shared;
pub mod signing;
pub mod state;
pub mod version;

pub use error::ApiError;
pub use faults::{CallRecord, ErrorFault, Faults};
pub use roles::{CKS_PROJECT_ROLE, CKS_PROJECT_ROLE_APIS, Permission, RoleSpec, RuleSpec};
pub use scenario::{
    AccountSpec, AclListSpec, GuestType, IpRange, LbProvider, NetworkMode, NetworkSpec, NicSpec,
    OfferingSpec, ProjectSpec, Role, Scenario, ScenarioError, Secret, Settings, Throttle, VmSpec,
    VpcSpec, ZoneSpec,
};
pub use scenario_cks::{CKS_ACCOUNT, CKS_ACL, CKS_NETWORK, CKS_NODE_PREFIX, CKS_TIER, CKS_VPC};
pub use scenario_kinds::{
    KINDS_INTERNAL_LB_ACL, KINDS_INTERNAL_LB_TIER, KINDS_INTERNAL_LB_VPC, KINDS_NETRIS_ACL,
    KINDS_NETRIS_TIER, KINDS_NETRIS_VPC, KINDS_NSX_NETWORK, KINDS_ROUTED_NETWORK,
    KINDS_ROUTED_TIER, KINDS_ROUTED_VPC, KINDS_SHARED_NETWORK,
};
pub use scenario_small::{
    SMALL_ACL, SMALL_NETSCALER_NETWORK, SMALL_NETWORK, SMALL_PROJECT, SMALL_PROJECT_ID, SMALL_TIER,
    SMALL_VPC, SMALL_ZONE,
};
pub use server::{SimError, SimOptions, SimServer, Simulator};
pub use version::Version;
