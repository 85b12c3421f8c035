//! The ownership tags of new rules and of the IP.

use super::*;

impl<'a> Planner<'a> {
    /// Ownership tags, and the tags saying which policies the controller gives the rules
    /// (so their policies are read again, see `observe`): one call per distinct set of
    /// missing tags (usually one for all new rules), the associated IP in another.
    pub(super) fn tags(&mut self) {
        let owner = owner_tags(&self.ctx.cluster_name, &self.spec.service.uid);
        let mut policies = Tags::new();
        if self.spec.health_check.is_some() && self.ctx.network.health_check {
            policies.insert(TAG_HEALTH_CHECK.to_string(), "true".to_string());
        }
        if self.spec.stickiness.is_some() {
            policies.insert(TAG_STICKINESS.to_string(), "true".to_string());
        }
        let mut by_tags: BTreeMap<Tags, Vec<ResourceRef>> = BTreeMap::new();
        let all: Tags = owner.clone().into_iter().chain(policies.clone()).collect();
        for name in &self.created {
            let mut tags = all.clone();
            if self.created_open.contains(name) {
                tags.insert(TAG_OPEN_FIREWALL.to_string(), "true".to_string());
            }
            by_tags
                .entry(tags)
                .or_default()
                .push(ResourceRef::CreatedRule(name.clone()));
        }
        for o in &self.observed.rules {
            if !self.kept_ids.contains(&o.id) {
                continue;
            }
            let untagged = owner.iter().any(|(k, v)| o.tags.get(k) != Some(v));
            let mut missing = if untagged { owner.clone() } else { Tags::new() };
            for (k, v) in &policies {
                if !o.tags.contains_key(k) {
                    missing.insert(k.clone(), v.clone());
                }
            }
            if !missing.is_empty() {
                by_tags
                    .entry(missing)
                    .or_default()
                    .push(ResourceRef::Existing(o.id.clone()));
            }
        }
        for (tags, resources) in by_tags {
            self.push(
                Stage::Finish,
                Step::TagResources {
                    resource_type: TagResourceType::LoadBalancer,
                    resources,
                    tags,
                },
            );
        }
        let ours = self.ip_ownership_tags();
        if let Some(id) = &self.adopted_ip {
            self.push(
                Stage::Finish,
                Step::TagResources {
                    resource_type: TagResourceType::PublicIpAddress,
                    resources: vec![ResourceRef::Existing(id.clone())],
                    tags: ours,
                },
            );
        } else if self.ip == IpRef::Associated {
            // An adopted address may carry its tags already (taken, then stopped before
            // its id was recorded): only what it lacks.
            let adopted = self
                .observed
                .ip
                .as_ref()
                .filter(|ip| ip.ownership == IpOwnership::Ours);
            let present = adopted.map(|ip| &ip.tags);
            let missing: Tags = ours
                .into_iter()
                .filter(|(key, _)| present.is_none_or(|tags| !tags.contains_key(key)))
                .collect();
            // An address found allocated (adopted) is taken before anything is built on
            // it: another Service may hold a claim on it as well. One this plan
            // associates is tagged while its rules are created, which costs no job's time
            // before the rules: it was free, and only a Service that claimed it too (a
            // claim left by a replica that lost its lease mid-plan) could take it first;
            // this Service's tag is then refused, and it leaves the address and deletes
            // the rules it built there (see `ip_claim`).
            let stage = if adopted.is_some() {
                Stage::Claim
            } else {
                Stage::Build
            };
            if !missing.is_empty() {
                self.push(
                    stage,
                    Step::TagResources {
                        resource_type: TagResourceType::PublicIpAddress,
                        resources: vec![ResourceRef::AssociatedIp],
                        tags: missing,
                    },
                );
            }
        } else {
            self.service_uid_tag(ours);
            self.keep_ip_tag();
        }
    }

    /// The tags of an address the controller associated for this Service: the cluster,
    /// [`TAG_ASSOCIATED`], the Service's UID (CloudStack keeps one value per key and
    /// resource, so the first Service to tag an address holds it: see
    /// [`super::super::ip_claim`]) and, when the Service keeps its address,
    /// [`TAG_KEEP_IP`].
    fn ip_ownership_tags(&self) -> Tags {
        let mut ours = owner_tags(&self.ctx.cluster_name, &self.spec.service.uid);
        ours.insert(TAG_ASSOCIATED.to_string(), "true".to_string());
        if self.spec.keep_ip {
            ours.insert(TAG_KEEP_IP.to_string(), "true".to_string());
        }
        ours
    }

    /// An address the Service recorded as associated by the controller but that does
    /// not name the Service yet (recorded, then stopped before its tags; or tagged by an
    /// older release) is taken before anything is built on it: the missing ownership
    /// tags, the Service's UID among them (the keep-ip tag is [`Self::keep_ip_tag`]'s).
    fn service_uid_tag(&mut self, ours: Tags) {
        let Some(ip) = self.observed.ip.as_ref() else {
            return;
        };
        let recorded = self.spec.ip_associated_by_controller
            && self.spec.recorded_ip_id.as_deref() == Some(ip.id.as_str());
        if !recorded || ip.tags.contains_key(TAG_SERVICE_UID) {
            return;
        }
        let missing: Tags = ours
            .into_iter()
            .filter(|(key, _)| key != TAG_KEEP_IP && !ip.tags.contains_key(key))
            .collect();
        self.push(
            Stage::Claim,
            Step::TagResources {
                resource_type: TagResourceType::PublicIpAddress,
                resources: vec![ResourceRef::Existing(ip.id.clone())],
                tags: missing,
            },
        );
    }

    /// An address the controller associated says whether its Service keeps it
    /// ([`TAG_KEEP_IP`]), so that the orphan pass never releases a kept address whose
    /// Service went without the controller seeing it.
    fn keep_ip_tag(&mut self) {
        let Some(ip) = self.observed.ip.as_ref().filter(|ip| ip.associated_by_us()) else {
            return;
        };
        let tagged = ip.tags.get(TAG_KEEP_IP).is_some_and(|v| v == "true");
        let step = match (self.spec.keep_ip, tagged) {
            (true, false) => Step::TagResources {
                resource_type: TagResourceType::PublicIpAddress,
                resources: vec![ResourceRef::Existing(ip.id.clone())],
                tags: [(TAG_KEEP_IP.to_string(), "true".to_string())].into(),
            },
            (false, true) => Step::UntagResources {
                resource_type: TagResourceType::PublicIpAddress,
                resources: vec![ip.id.clone()],
                keys: vec![TAG_KEEP_IP.to_string()],
            },
            _ => return,
        };
        self.push(Stage::Finish, step);
    }
}
