//! A plan dropped before its end (its future cancelled: the leader lease was lost, the
//! process shuts down) may have changed rules without saying what: the engine forgets what
//! it holds of them, as after a failed plan, so a later term reads them again instead of
//! trusting a stale view or stale members.

use super::Engine;
use crate::cloud::loadbalancer::observe::ObservedLb;

/// Watches one plan while it runs; [`Interrupted::ran_to_its_end`] disarms it.
pub(super) struct Interrupted<'a> {
    engine: &'a Engine,
    /// The rules the plan may touch (the Service's existing rules).
    rules: Vec<String>,
    armed: bool,
}

impl<'a> Interrupted<'a> {
    /// Watches the plan of the Service observed as `observed`.
    pub(super) fn watch(engine: &'a Engine, observed: &ObservedLb) -> Self {
        Self {
            engine,
            rules: observed.rules.iter().map(|rule| rule.id.clone()).collect(),
            armed: true,
        }
    }

    /// The plan ran to its end (or failed on its own): nothing to forget here.
    pub(super) fn ran_to_its_end(mut self) {
        self.armed = false;
    }
}

impl Drop for Interrupted<'_> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        for id in &self.rules {
            self.engine.details.forget(id);
        }
        self.engine.views.invalidate();
    }
}
