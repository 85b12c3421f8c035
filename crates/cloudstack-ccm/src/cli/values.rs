//! Value parsers for Go-style flags: booleans (`strconv.ParseBool`) and durations
//! (`time.ParseDuration`, plus humantime's friendlier forms).

use std::time::Duration;

/// Parses a boolean the way Go's `strconv.ParseBool` does:
/// `1 t T TRUE true True` and `0 f F FALSE false False`.
pub(crate) fn parse_go_bool(text: &str) -> Result<bool, String> {
    match text {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Ok(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Ok(false),
        _ => Err(format!("{text:?} is not a boolean (use true or false)")),
    }
}

/// Parses a duration: Go's format (`15s`, `2m0s`, `1h30m`, `1.5s`, `300ms`, `0`) and
/// humantime's (`2min`, `1 hour`).
pub(crate) fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    if text == "0" {
        return Ok(Duration::ZERO);
    }
    parse_go_duration(text)
        .or_else(|| humantime::parse_duration(text).ok())
        .ok_or_else(|| format!("{text:?} is not a duration (examples: 15s, 2m0s, 1h30m, 500ms)"))
}

/// Go's `time.ParseDuration` for non-negative values: a sequence of decimal numbers,
/// each with a unit of `ns`, `us`, `µs`, `ms`, `s`, `m` or `h`.
fn parse_go_duration(text: &str) -> Option<Duration> {
    let mut rest = text;
    let mut total = 0f64;
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let number: f64 = rest[..number_len].parse().ok()?;
        rest = &rest[number_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let seconds_per_unit = match &rest[..unit_len] {
            "ns" => 1e-9,
            "us" | "µs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return None,
        };
        rest = &rest[unit_len..];
        total += number * seconds_per_unit;
    }
    Duration::try_from_secs_f64(total).ok()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::{parse_duration, parse_go_bool};

    #[test]
    fn durations_table() {
        let cases = [
            ("15s", Duration::from_secs(15)),
            ("2m0s", Duration::from_secs(120)),
            ("1h30m", Duration::from_secs(5400)),
            ("300ms", Duration::from_millis(300)),
            ("1.5s", Duration::from_millis(1500)),
            ("0", Duration::ZERO),
            ("5m", Duration::from_secs(300)),
            ("2min", Duration::from_secs(120)),
            ("1 hour", Duration::from_secs(3600)),
        ];
        for (text, want) in cases {
            assert_eq!(parse_duration(text), Ok(want), "{text}");
        }
        for bad in ["", "abc", "15", "-5s", "5x"] {
            assert!(parse_duration(bad).is_err(), "{bad:?} must fail");
        }
    }

    #[test]
    fn bools_table() {
        for text in ["1", "t", "T", "TRUE", "true", "True"] {
            assert_eq!(parse_go_bool(text), Ok(true), "{text}");
        }
        for text in ["0", "f", "F", "FALSE", "false", "False"] {
            assert_eq!(parse_go_bool(text), Ok(false), "{text}");
        }
        for text in ["yes", "", "tRuE"] {
            assert!(parse_go_bool(text).is_err(), "{text}");
        }
    }
}
