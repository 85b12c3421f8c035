//! The health-check and stickiness policies of each rule.

use super::*;

impl<'a> Planner<'a> {
    /// Health-check and stickiness policies of one rule. Removals of outdated policies
    /// go before creations (one policy of each kind per rule). A kind whose list the
    /// server or the role refused is left alone on a rule tagged as having one from the
    /// controller: it cannot be compared or removed, and creating another would fail
    /// ("Already applied … policy").
    pub(super) fn policies(&mut self, rule: &RuleSpec, o: Option<&ObservedRule>, r: RuleRef) {
        let unknown_health_check =
            o.is_some_and(|o| o.health_checks_unknown && o.tags.contains_key(TAG_HEALTH_CHECK));
        let unknown_stickiness =
            o.is_some_and(|o| o.stickiness_unknown && o.tags.contains_key(TAG_STICKINESS));
        let caps = &self.ctx.network;
        let name = o
            .map_or(rule.name.as_str(), |o| o.name.as_str())
            .to_string();
        let hc = self
            .spec
            .health_check
            .as_ref()
            .filter(|_| caps.health_check && rule.protocol != LbProtocol::Udp)
            .filter(|_| !unknown_health_check)
            .filter(|_| self.ctx.access.allows(Feature::HealthCheck));
        let mut create_hc = hc.is_some();
        for h in o.map(|o| o.health_checks.as_slice()).unwrap_or_default() {
            let same = hc.is_some_and(|w| {
                w.path == h.path
                    && w.interval_secs == h.interval_secs
                    && w.timeout_secs == h.timeout_secs
                    && w.healthy_threshold == h.healthy_threshold
                    && w.unhealthy_threshold == h.unhealthy_threshold
            });
            if same && create_hc {
                create_hc = false;
            } else if hc.is_some() || h.description == POLICY_DESCRIPTION {
                self.push(
                    Stage::Build,
                    Step::DeleteHealthCheck {
                        id: h.id.clone(),
                        rule: name.clone(),
                    },
                );
            }
        }
        if let (true, Some(check)) = (create_hc, hc) {
            self.push(
                Stage::Finish,
                Step::CreateHealthCheck {
                    rule: r.clone(),
                    check: check.clone(),
                },
            );
        }
        let st = self
            .spec
            .stickiness
            .as_ref()
            .filter(|_| !unknown_stickiness)
            .filter(|_| self.ctx.access.allows(Feature::Stickiness));
        let mut create_st = st.is_some();
        for s in o.map(|o| o.stickiness.as_slice()).unwrap_or_default() {
            let same = st.is_some_and(|w| Some(w.method) == s.method && w.params == s.params);
            if same && create_st {
                create_st = false;
            } else if st.is_some() || s.description == POLICY_DESCRIPTION {
                self.push(
                    Stage::Build,
                    Step::DeleteStickiness {
                        id: s.id.clone(),
                        rule: name.clone(),
                    },
                );
            }
        }
        if let (true, Some(policy)) = (create_st, st) {
            self.push(
                Stage::Finish,
                Step::CreateStickiness {
                    rule: r,
                    name: format!(
                        "{}-{}",
                        self.spec.lb_name,
                        policy.method.as_str().to_ascii_lowercase()
                    ),
                    policy: policy.clone(),
                },
            );
        }
    }
}
