//! The ownership tags of new rules and of the IP.

use super::*;

impl<'a> Planner<'a> {
    /// Ownership tags, and the tags saying which policies the controller gives the rules
    /// (so their policies are read again, see `observe`): one call per distinct set of
    /// missing tags (usually one for all new rules), the associated IP in another.
    pub(super) fn tags(&mut self) {
        let owner: Tags = [
            (TAG_CLUSTER.to_string(), self.ctx.cluster_name.clone()),
            (TAG_SERVICE_UID.to_string(), self.spec.service.uid.clone()),
        ]
        .into();
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
        let mut ours: Tags = [
            (TAG_CLUSTER.to_string(), self.ctx.cluster_name.clone()),
            (TAG_ASSOCIATED.to_string(), "true".to_string()),
        ]
        .into();
        if self.spec.keep_ip {
            ours.insert(TAG_KEEP_IP.to_string(), "true".to_string());
        }
        if let Some(id) = &self.adopted_ip {
            self.push(
                Stage::Finish,
                Step::TagResources {
                    resource_type: TagResourceType::PublicIpAddress,
                    resources: vec![ResourceRef::Existing(id.clone())],
                    tags: ours.clone(),
                },
            );
        } else if self.ip == IpRef::Associated {
            self.push(
                Stage::Build,
                Step::TagResources {
                    resource_type: TagResourceType::PublicIpAddress,
                    resources: vec![ResourceRef::AssociatedIp],
                    tags: ours,
                },
            );
        } else {
            self.keep_ip_tag();
        }
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
