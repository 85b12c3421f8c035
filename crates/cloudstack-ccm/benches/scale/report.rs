//! Result rows: one measured value next to its target and the Go CCM's number, printed as
//! a table per scenario and written as JSON.

use serde_json::{Value, json};
use std::fmt::Write as _;

/// Whether a measured value meets its target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Meets the target.
    Pass,
    /// Misses the target.
    Miss,
    /// Informational: no target.
    Info,
    /// Could not be measured (the run did not converge in time).
    Failed,
}

impl Verdict {
    /// `pass` or `miss` from a comparison.
    pub fn from_ok(ok: bool) -> Self {
        if ok { Verdict::Pass } else { Verdict::Miss }
    }

    fn as_str(self) -> &'static str {
        match self {
            Verdict::Pass => "pass",
            Verdict::Miss => "MISS",
            Verdict::Info => "-",
            Verdict::Failed => "FAILED",
        }
    }
}

/// One measured value.
#[derive(Debug, Clone)]
pub struct Row {
    /// Scenario name (`nodes-init`, `lb-burst`, …).
    pub scenario: String,
    /// Size (`N=1000`, `S=50 P=3 job=50ms`, …).
    pub size: String,
    /// What was measured (`CloudStack calls`, `ingress p95`, …).
    pub metric: String,
    /// The measured value, formatted.
    pub measured: String,
    /// The measured value as a number (for the JSON file).
    pub value: Option<f64>,
    /// The target, formatted (`≤ 4`), empty when there is none.
    pub target: String,
    /// Verdict against the target.
    pub verdict: Verdict,
    /// The Go CCM's number where DESIGN.md §3 gives one for this scenario.
    pub go_reference: String,
}

impl Row {
    /// An informational row (no target).
    pub fn info(scenario: &str, size: &str, metric: &str, measured: impl Into<String>) -> Self {
        Row {
            scenario: scenario.to_owned(),
            size: size.to_owned(),
            metric: metric.to_owned(),
            measured: measured.into(),
            value: None,
            target: String::new(),
            verdict: Verdict::Info,
            go_reference: String::new(),
        }
    }

    /// A row for a numeric value with an upper-bound target: pass when `value <= limit`.
    pub fn at_most(
        scenario: &str,
        size: &str,
        metric: &str,
        value: f64,
        shown: impl Into<String>,
        limit: f64,
        target: impl Into<String>,
    ) -> Self {
        Row {
            value: Some(value),
            target: target.into(),
            verdict: Verdict::from_ok(value <= limit),
            ..Row::info(scenario, size, metric, shown)
        }
    }

    /// A row for something that could not be measured.
    pub fn failed(scenario: &str, size: &str, metric: &str, why: impl Into<String>) -> Self {
        Row {
            verdict: Verdict::Failed,
            ..Row::info(scenario, size, metric, why)
        }
    }

    /// Sets the numeric value.
    pub fn with_value(mut self, value: f64) -> Self {
        self.value = Some(value);
        self
    }

    /// Sets the Go CCM reference.
    pub fn with_go(mut self, reference: impl Into<String>) -> Self {
        self.go_reference = reference.into();
        self
    }

    fn to_json(&self) -> Value {
        json!({
            "scenario": self.scenario,
            "size": self.size,
            "metric": self.metric,
            "measured": self.measured,
            "value": self.value,
            "target": self.target,
            "verdict": self.verdict.as_str(),
            "go_reference": self.go_reference,
        })
    }
}

/// Formats rows as a Markdown table (also readable on a terminal).
pub fn table(rows: &[Row]) -> String {
    let header = [
        "scenario",
        "size",
        "metric",
        "measured",
        "target",
        "result",
        "Go CCM v1.2.0",
    ];
    let cells: Vec<[String; 7]> = rows
        .iter()
        .map(|r| {
            [
                r.scenario.clone(),
                r.size.clone(),
                r.metric.clone(),
                r.measured.clone(),
                r.target.clone(),
                r.verdict.as_str().to_owned(),
                r.go_reference.clone(),
            ]
        })
        .collect();
    let mut widths = header.map(|h| h.chars().count());
    for row in &cells {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |items: &[String]| {
        let mut out = String::from("|");
        for (item, w) in items.iter().zip(widths) {
            let pad = w - item.chars().count();
            let _ = write!(out, " {item}{} |", " ".repeat(pad));
        }
        out.push('\n');
        out
    };
    let mut out = line(&header.map(str::to_owned));
    out.push_str(&line(&widths.map(|w| "-".repeat(w))));
    for row in &cells {
        out.push_str(&line(row));
    }
    out
}

/// The JSON document `--json` writes.
pub fn to_json(rows: &[Row], command: &str, quick: bool) -> Value {
    json!({
        "command": command,
        "quick": quick,
        "rows": rows.iter().map(Row::to_json).collect::<Vec<_>>(),
    })
}

/// Seconds with two decimals.
pub fn secs(seconds: f64) -> String {
    format!("{seconds:.2} s")
}
