//! How the demo looks: one line per observed step with its time offset, phase headings and
//! the summary table. Colour and symbols only on a terminal, and never with `NO_COLOR`.

use std::fmt::Write as _;
use std::io::IsTerminal;
use std::time::Duration;

/// What kind of line it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mark {
    /// Something the demo itself did (created, changed or deleted an object).
    Action,
    /// A change the controllers made, observed in CloudStack or Kubernetes.
    Done,
    /// A Normal Event.
    Note,
    /// A Warning Event or a failed job.
    Warn,
}

/// One line of the progress view.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Line {
    /// Time since the demo started.
    pub at: Duration,
    /// Its kind.
    pub mark: Mark,
    /// What happened.
    pub text: String,
    /// Where it was seen (CloudStack command and job time, the object, ...).
    pub detail: String,
}

impl Line {
    /// A line at `at`.
    pub fn new(
        at: Duration,
        mark: Mark,
        text: impl Into<String>,
        detail: impl Into<String>,
    ) -> Line {
        Line {
            at,
            mark,
            text: text.into(),
            detail: detail.into(),
        }
    }
}

/// Terminal styling, or none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Style {
    /// Colours and symbols on.
    pub fancy: bool,
}

const RESET: &str = "\x1b[0m";
const BOLD: &str = "\x1b[1m";
const DIM: &str = "\x1b[2m";
const GREEN: &str = "\x1b[32m";
const YELLOW: &str = "\x1b[33m";
const CYAN: &str = "\x1b[36m";
/// Width of a line's text column.
const TEXT_WIDTH: usize = 58;
/// Column where a line's detail starts: time (9), mark, text, one space each between.
const DETAIL_COLUMN: usize = 9 + 1 + 1 + 1 + TEXT_WIDTH + 1;

impl Style {
    /// Fancy when stdout is a terminal and `NO_COLOR` is unset or empty.
    pub fn detect() -> Style {
        let no_color = std::env::var_os("NO_COLOR").is_some_and(|value| !value.is_empty());
        Style {
            fancy: std::io::stdout().is_terminal() && !no_color,
        }
    }

    fn paint(&self, code: &str, text: &str) -> String {
        if self.fancy {
            format!("{code}{text}{RESET}")
        } else {
            text.to_string()
        }
    }

    /// A progress line.
    pub fn line(&self, line: &Line) -> String {
        let (symbol, plain, colour) = match line.mark {
            Mark::Action => ("▶", ">", CYAN),
            Mark::Done => ("✓", "+", GREEN),
            Mark::Note => ("·", "-", DIM),
            Mark::Warn => ("⚠", "!", YELLOW),
        };
        let symbol = if self.fancy { symbol } else { plain };
        let at = format!("{:>+8.3}s", line.at.as_secs_f64());
        // A text longer than its column would push the detail out of line: the detail
        // then goes on a line of its own, in its column.
        let overflows = line.text.chars().count() > TEXT_WIDTH && !line.detail.is_empty();
        let text = format!("{:<TEXT_WIDTH$}", line.text);
        let text = match line.mark {
            Mark::Action => self.paint(BOLD, &text),
            _ => text,
        };
        let head = format!(
            "{} {} {}",
            self.paint(DIM, &at),
            self.paint(colour, symbol),
            text
        );
        if overflows {
            let indent = " ".repeat(DETAIL_COLUMN);
            return format!(
                "{}\n{indent}{}",
                head.trim_end(),
                self.paint(DIM, &line.detail)
            );
        }
        format!("{head} {}", self.paint(DIM, &line.detail))
            .trim_end()
            .to_string()
    }

    /// What the marks at the start of the lines mean.
    pub(crate) fn legend(&self) -> String {
        let mark = |fancy: &str, plain: &str| if self.fancy { fancy } else { plain }.to_string();
        format!(
            "Marks: {} the demo acts (creates, changes, deletes)   {} a change the controllers made, \
             seen in CloudStack or Kubernetes   {} a Normal Event   {} a Warning Event or a failed job",
            mark("▶", ">"),
            mark("✓", "+"),
            mark("·", "-"),
            mark("⚠", "!")
        )
    }

    /// A phase heading.
    pub(crate) fn heading(&self, title: &str) -> String {
        if self.fancy {
            format!("\n{BOLD}── {title} ──{RESET}")
        } else {
            format!("\n== {title} ==")
        }
    }

    /// A final status line: success or failure.
    pub fn verdict(&self, ok: bool, text: &str) -> String {
        match (ok, self.fancy) {
            (true, true) => format!("{GREEN}{BOLD}✓ {text}{RESET}"),
            (false, true) => format!("{YELLOW}{BOLD}✗ {text}{RESET}"),
            (true, false) => format!("OK: {text}"),
            (false, false) => format!("FAILED: {text}"),
        }
    }
}

/// Numbers of one phase, for the summary table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PhaseStats {
    /// The phase's title.
    pub name: String,
    /// From the action to convergence.
    pub wall: Duration,
    /// CloudStack `list*`/`query*` calls.
    pub reads: u64,
    /// Other CloudStack calls.
    pub mutating: u64,
    /// Async jobs started.
    pub jobs: u64,
    /// Calls CloudStack refused and async jobs that failed.
    pub failed: u64,
}

/// The summary table, a total row included.
pub(crate) fn summary_table(style: &Style, phases: &[PhaseStats]) -> String {
    let total = PhaseStats {
        name: "total".to_string(),
        wall: phases.iter().map(|p| p.wall).sum(),
        reads: phases.iter().map(|p| p.reads).sum(),
        mutating: phases.iter().map(|p| p.mutating).sum(),
        jobs: phases.iter().map(|p| p.jobs).sum(),
        failed: phases.iter().map(|p| p.failed).sum(),
    };
    let width = phases
        .iter()
        .map(|p| p.name.chars().count())
        .max()
        .unwrap_or(5)
        .max(5);
    let mut out = String::new();
    let header = format!(
        "{:<width$}  {:>9}  {:>10}  {:>13}  {:>10}  {:>12}",
        "phase", "wall time", "read calls", "mutating calls", "async jobs", "failed calls"
    );
    let _ = writeln!(out, "{}", style.paint(BOLD, &header));
    let rule = "-".repeat(header.chars().count());
    let _ = writeln!(out, "{}", style.paint(DIM, &rule));
    for (i, phase) in phases.iter().chain(std::iter::once(&total)).enumerate() {
        if i == phases.len() {
            let _ = writeln!(out, "{}", style.paint(DIM, &rule));
        }
        let row = format!(
            "{:<width$}  {:>8.2}s  {:>10}  {:>14}  {:>10}  {:>12}",
            phase.name,
            phase.wall.as_secs_f64(),
            phase.reads,
            phase.mutating,
            phase.jobs,
            phase.failed
        );
        let _ = writeln!(out, "{row}");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_lines_have_no_escape_codes_or_symbols() {
        let style = Style { fancy: false };
        let line = Line::new(
            Duration::from_millis(1520),
            Mark::Done,
            "IP associated",
            "associateIpAddress",
        );
        let text = style.line(&line);
        assert!(text.starts_with("  +1.520s + IP associated"), "{text}");
        assert!(text.ends_with("associateIpAddress"), "{text}");
        assert!(text.is_ascii(), "{text}");
    }

    #[test]
    fn a_long_text_keeps_the_detail_in_its_column() {
        let style = Style { fancy: false };
        let short = style.line(&Line::new(Duration::ZERO, Mark::Done, "short", "detail"));
        let long_text = "x".repeat(TEXT_WIDTH + 20);
        let long = style.line(&Line::new(Duration::ZERO, Mark::Done, &long_text, "detail"));
        let column = |text: &str| text.lines().last().unwrap().find("detail").unwrap();
        assert_eq!(column(&short), DETAIL_COLUMN, "{short:?}");
        assert_eq!(column(&long), column(&short), "{long}");
        assert!(long.lines().next().unwrap().ends_with(&long_text), "{long}");
        assert!(!long.lines().next().unwrap().contains("detail"));
    }

    #[test]
    fn the_legend_explains_every_plain_mark() {
        let legend = Style { fancy: false }.legend();
        for mark in [
            "> the demo acts",
            "+ a change",
            "- a Normal Event",
            "! a Warning",
        ] {
            assert!(legend.contains(mark), "{legend}");
        }
    }

    #[test]
    fn fancy_lines_are_coloured() {
        let style = Style { fancy: true };
        let line = Line::new(Duration::ZERO, Mark::Warn, "job failed", "");
        let text = style.line(&line);
        assert!(text.contains("\x1b[33m⚠\x1b[0m"), "{text:?}");
    }

    #[test]
    fn summary_table_adds_a_total_row() {
        let phases = vec![
            PhaseStats {
                name: "nodes".into(),
                wall: Duration::from_millis(500),
                reads: 3,
                mutating: 0,
                jobs: 0,
                failed: 0,
            },
            PhaseStats {
                name: "create".into(),
                wall: Duration::from_millis(1500),
                reads: 10,
                mutating: 6,
                jobs: 6,
                failed: 1,
            },
        ];
        let table = summary_table(&Style { fancy: false }, &phases);
        let total = table.lines().last().unwrap();
        assert!(total.starts_with("total"), "{table}");
        assert!(total.contains("2.00s"), "{table}");
        assert_eq!(
            total.split_whitespace().collect::<Vec<_>>(),
            ["total", "2.00s", "13", "6", "6", "1"]
        );
    }
}
