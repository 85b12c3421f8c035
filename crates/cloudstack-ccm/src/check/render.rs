//! The check's report for a person (grouped, one line per check, a hint under each
//! problem, colour only on a terminal) and as JSON.

use std::io::Write;

use super::{FeatureVerdict, Report, Status};

/// The mark of a status.
fn mark(status: Status) -> &'static str {
    match status {
        Status::Ok => "✔",
        Status::Warn => "‼",
        Status::Fail => "×",
        Status::Skip => "-",
    }
}

/// The ANSI colour of a status.
fn colour(status: Status) -> &'static str {
    match status {
        Status::Ok => "\x1b[32m",
        Status::Warn => "\x1b[33m",
        Status::Fail => "\x1b[31m",
        Status::Skip => "\x1b[2m",
    }
}

/// Writes the report for a person; `colour` adds ANSI colours (a terminal).
pub fn write_text(report: &Report, out: &mut impl Write, color: bool) -> std::io::Result<()> {
    let paint = |status: Status, text: &str| {
        if color {
            format!("{}{text}\x1b[0m", colour(status))
        } else {
            text.to_string()
        }
    };
    for group in &report.groups {
        writeln!(out, "{}", group.name)?;
        writeln!(out, "{}", "-".repeat(group.name.chars().count()))?;
        for check in &group.checks {
            writeln!(
                out,
                "{} {}: {}",
                paint(check.status, mark(check.status)),
                check.name,
                check.detail
            )?;
            if matches!(check.status, Status::Warn | Status::Fail) {
                if let Some(hint) = &check.hint {
                    writeln!(out, "    hint: {hint}")?;
                }
                if let Some(doc) = check.doc {
                    writeln!(out, "    see: {doc}")?;
                }
            }
        }
        writeln!(out)?;
    }
    writeln!(out, "Features")?;
    writeln!(out, "--------")?;
    for row in &report.features {
        let (status, word) = match row.verdict {
            FeatureVerdict::Works => (Status::Ok, "works"),
            FeatureVerdict::Degraded => (Status::Warn, "degraded"),
            FeatureVerdict::Unavailable => (Status::Fail, "unavailable"),
        };
        let reason = row
            .reason
            .as_deref()
            .map(|r| format!(": {r}"))
            .unwrap_or_default();
        writeln!(
            out,
            "{} {}: {word}{reason}",
            paint(status, mark(status)),
            row.feature
        )?;
        if let Some(fix) = &row.fix {
            writeln!(out, "    fix: {fix}")?;
        }
    }
    writeln!(out)?;
    let calls: Vec<String> = report
        .cloudstack_calls
        .iter()
        .map(|(command, n)| format!("{command} {n}"))
        .collect();
    writeln!(
        out,
        "CloudStack calls: {} ({}); all read-only.",
        report.call_count(),
        calls.join(", ")
    )?;
    writeln!(out, "Verdict: {}.", report.verdict)?;
    out.flush()
}

/// Writes the report as one JSON document.
pub fn write_json(report: &Report, out: &mut impl Write) -> std::io::Result<()> {
    serde_json::to_writer_pretty(&mut *out, report)?;
    writeln!(out)?;
    out.flush()
}
