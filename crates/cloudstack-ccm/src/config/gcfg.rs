//! A small parser for the gcfg (git-config style) format of the `cloud-config` file.
//!
//! The rules, which the common ini crates get wrong:
//! * section and key names are case-insensitive (returned lower-cased);
//! * `;` and `#` start a comment anywhere outside double quotes (`a = b#c` is `b`);
//! * values are trimmed; whitespace inside a value is kept as written;
//! * `"…"` quotes a part of a value, with the escapes `\"`, `\\`, `\n`, `\t`, `\b`;
//! * a `\` at the end of a line continues the value on the next line;
//! * a key with no `=` is a bare key (boolean true for boolean keys);
//! * entries before any section header belong to no section (the caller decides).
//!
//! Repeated keys are all returned in order, so the caller can let the last one win.

use thiserror::Error;

/// One `key = value` line of a gcfg file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Lower-cased section name, `None` before the first section header.
    pub section: Option<String>,
    /// The subsection of `[section "subsection"]`, as written.
    pub subsection: Option<String>,
    /// Lower-cased key name.
    pub key: String,
    /// The value; `None` for a bare key written without `=`.
    pub value: Option<String>,
    /// 1-based line number of the key.
    pub line: usize,
}

/// One `[section]` or `[section "subsection"]` header of a gcfg file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Header {
    /// Lower-cased section name.
    pub section: String,
    /// The subsection, as written.
    pub subsection: Option<String>,
    /// 1-based line number of the header.
    pub line: usize,
}

/// A parsed gcfg file: its section headers (an empty section has no entries but still
/// a header) and its entries, each in file order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Document {
    /// Every section header.
    pub headers: Vec<Header>,
    /// Every `key = value` line.
    pub entries: Vec<Entry>,
}

/// A syntax error in a gcfg file.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("line {line}: {message}")]
pub struct SyntaxError {
    /// 1-based line number where the error was found.
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

/// Parses gcfg text into its entries, in file order.
pub fn parse(text: &str) -> Result<Vec<Entry>, SyntaxError> {
    parse_document(text).map(|document| document.entries)
}

/// Parses gcfg text into its section headers and entries.
pub(crate) fn parse_document(text: &str) -> Result<Document, SyntaxError> {
    Parser {
        chars: text.chars().collect(),
        pos: 0,
        line: 1,
    }
    .run()
}

struct Parser {
    chars: Vec<char>,
    pos: usize,
    line: usize,
}

impl Parser {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.peek()?;
        self.pos += 1;
        if c == '\n' {
            self.line += 1;
        }
        Some(c)
    }

    fn error(&self, message: impl Into<String>) -> SyntaxError {
        SyntaxError {
            line: self.line,
            message: message.into(),
        }
    }

    fn skip_blanks(&mut self) {
        while matches!(self.peek(), Some(' ' | '\t' | '\r')) {
            self.bump();
        }
    }

    fn skip_to_line_end(&mut self) {
        while !matches!(self.peek(), None | Some('\n')) {
            self.bump();
        }
    }

    /// After a header or key: only blanks and a comment may follow on the line.
    fn expect_line_end(&mut self, after: &str) -> Result<(), SyntaxError> {
        self.skip_blanks();
        match self.peek() {
            None | Some('\n') => Ok(()),
            Some(';' | '#') => {
                self.skip_to_line_end();
                Ok(())
            }
            Some(c) => Err(self.error(format!("unexpected {c:?} after {after}"))),
        }
    }

    fn run(mut self) -> Result<Document, SyntaxError> {
        let mut entries = Vec::new();
        let mut headers = Vec::new();
        let mut section: Option<String> = None;
        let mut subsection: Option<String> = None;
        loop {
            self.skip_blanks();
            match self.peek() {
                None => return Ok(Document { headers, entries }),
                Some('\n') => {
                    self.bump();
                }
                Some(';' | '#') => self.skip_to_line_end(),
                Some('[') => {
                    let line = self.line;
                    self.bump();
                    let (name, sub) = self.header()?;
                    headers.push(Header {
                        section: name.clone(),
                        subsection: sub.clone(),
                        line,
                    });
                    section = Some(name);
                    subsection = sub;
                    self.expect_line_end("section header")?;
                }
                Some(c) if c.is_ascii_alphabetic() => {
                    let line = self.line;
                    let key = self.name();
                    self.skip_blanks();
                    let value = if self.peek() == Some('=') {
                        self.bump();
                        Some(self.value()?)
                    } else {
                        self.expect_line_end(&format!("key {key:?} (expected '=')"))?;
                        None
                    };
                    entries.push(Entry {
                        section: section.clone(),
                        subsection: subsection.clone(),
                        key,
                        value,
                        line,
                    });
                }
                Some(c) => return Err(self.error(format!("unexpected {c:?}; expected a key"))),
            }
        }
    }

    /// A key or section name: a letter, then letters, digits and `-`. Lower-cased.
    fn name(&mut self) -> String {
        let mut name = String::new();
        while let Some(c) = self.peek() {
            if c.is_ascii_alphanumeric() || c == '-' {
                name.push(c.to_ascii_lowercase());
                self.bump();
            } else {
                break;
            }
        }
        name
    }

    /// `name]` or `name "subsection"]`, the `[` already consumed.
    fn header(&mut self) -> Result<(String, Option<String>), SyntaxError> {
        self.skip_blanks();
        if !self.peek().is_some_and(|c| c.is_ascii_alphabetic()) {
            return Err(self.error("section name must start with a letter"));
        }
        let name = self.name();
        self.skip_blanks();
        let sub = if self.peek() == Some('"') {
            self.bump();
            let mut sub = String::new();
            loop {
                match self.bump() {
                    Some('"') => break,
                    Some('\\') => match self.bump() {
                        Some(c @ ('"' | '\\')) => sub.push(c),
                        _ => return Err(self.error("invalid escape in subsection name")),
                    },
                    Some('\n') | None => return Err(self.error("unterminated subsection name")),
                    Some(c) => sub.push(c),
                }
            }
            self.skip_blanks();
            Some(sub)
        } else {
            None
        };
        if self.peek() != Some(']') {
            return Err(self.error(format!("section header [{name}: expected ']'")));
        }
        self.bump();
        Ok((name, sub))
    }

    /// The value after `=`, up to the end of the (logical) line.
    fn value(&mut self) -> Result<String, SyntaxError> {
        let mut value = String::new();
        let mut pending_blanks = String::new();
        let mut quoted = false;
        loop {
            let Some(c) = self.peek() else {
                if quoted {
                    return Err(self.error("unterminated quoted value"));
                }
                return Ok(value);
            };
            match c {
                '\n' if quoted => return Err(self.error("unterminated quoted value")),
                '\n' => return Ok(value),
                ';' | '#' if !quoted => {
                    self.skip_to_line_end();
                    return Ok(value);
                }
                '\r' if self.chars.get(self.pos + 1) == Some(&'\n') => {
                    self.bump();
                }
                ' ' | '\t' | '\r' if !quoted => {
                    self.bump();
                    if !value.is_empty() {
                        pending_blanks.push(c);
                    }
                }
                '"' => {
                    self.bump();
                    value.push_str(&pending_blanks);
                    pending_blanks.clear();
                    quoted = !quoted;
                }
                '\\' => {
                    self.bump();
                    let escaped = match self.bump() {
                        Some('\n') => None,
                        Some('\r') if self.peek() == Some('\n') => {
                            self.bump();
                            None
                        }
                        Some('"') => Some('"'),
                        Some('\\') => Some('\\'),
                        Some('n') => Some('\n'),
                        Some('t') => Some('\t'),
                        Some('b') => Some('\u{8}'),
                        Some(other) => {
                            return Err(self.error(format!("unknown escape \\{other}")));
                        }
                        None => return Err(self.error("'\\' at end of file")),
                    };
                    if let Some(ch) = escaped {
                        value.push_str(&pending_blanks);
                        pending_blanks.clear();
                        value.push(ch);
                    }
                }
                _ => {
                    self.bump();
                    value.push_str(&pending_blanks);
                    pending_blanks.clear();
                    value.push(c);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Entry, parse};

    fn global(key: &str, value: Option<&str>, line: usize) -> Entry {
        Entry {
            section: Some("global".into()),
            subsection: None,
            key: key.into(),
            value: value.map(Into::into),
            line,
        }
    }

    #[test]
    fn rules_table() {
        let cases: &[(&str, &str, Option<&str>)] = &[
            ("plain value", "[Global]\nkey = value", Some("value")),
            (
                "values are trimmed",
                "[Global]\nkey =   value  \t",
                Some("value"),
            ),
            ("inner blanks kept", "[Global]\nkey = a  b", Some("a  b")),
            ("hash comment", "[Global]\nkey = abc#def", Some("abc")),
            (
                "semicolon comment",
                "[Global]\nkey = abc ; note",
                Some("abc"),
            ),
            (
                "comment char quoted",
                "[Global]\nkey = \"abc#d;ef\"",
                Some("abc#d;ef"),
            ),
            (
                "quoted blanks kept",
                "[Global]\nkey = \"  a b  \"",
                Some("  a b  "),
            ),
            (
                "mixed quoting",
                "[Global]\nkey = a \"b c\" d",
                Some("a b c d"),
            ),
            (
                "escaped quote",
                "[Global]\nkey = \"say \\\"hi\\\"\"",
                Some("say \"hi\""),
            ),
            ("escaped backslash", "[Global]\nkey = a\\\\b", Some("a\\b")),
            (
                "newline and tab escapes",
                "[Global]\nkey = \"a\\nb\\tc\"",
                Some("a\nb\tc"),
            ),
            (
                "line continuation",
                "[Global]\nkey = abc\\\ndef",
                Some("abcdef"),
            ),
            ("crlf line endings", "[Global]\r\nkey = v\r\n", Some("v")),
            ("bare key", "[Global]\nkey", None),
            ("bare key with comment", "[Global]\nkey ; yes", None),
            ("empty value", "[Global]\nkey =", Some("")),
            ("uppercase section and key", "[GLOBAL]\nKEY = V", Some("V")),
            ("no blanks around =", "[global]\nkey=v", Some("v")),
        ];
        for (name, text, want) in cases {
            let entries = parse(text).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(entries.len(), 1, "{name}");
            assert_eq!(entries[0].key, "key", "{name}");
            assert_eq!(entries[0].section.as_deref(), Some("global"), "{name}");
            assert_eq!(entries[0].value.as_deref(), *want, "{name}");
        }
    }

    #[test]
    fn errors_table() {
        let cases: &[(&str, &str, usize, &str)] = &[
            (
                "unterminated quote",
                "[Global]\nkey = \"abc\n",
                2,
                "unterminated",
            ),
            (
                "unknown escape",
                "[Global]\n\nkey = a\\qb",
                3,
                "unknown escape",
            ),
            ("missing bracket", "[Global\nkey = v", 1, "expected ']'"),
            (
                "garbage after key",
                "[Global]\nkey value",
                2,
                "expected '='",
            ),
            (
                "key starting with digit",
                "[Global]\n1key = v",
                2,
                "expected a key",
            ),
            (
                "garbage after header",
                "[Global] x",
                1,
                "after section header",
            ),
        ];
        for (name, text, line, fragment) in cases {
            let err = parse(text).expect_err(name);
            assert_eq!(err.line, *line, "{name}: {err}");
            assert!(err.to_string().contains(fragment), "{name}: {err}");
        }
    }

    #[test]
    fn full_file_keeps_order_lines_and_repeats() {
        let text = "; leading comment\n# another\n[Global]\napi-url = http://a\n\n  API-KEY=k1\napi-key = k2\nssl-no-verify\n";
        let entries = parse(text).unwrap();
        assert_eq!(
            entries,
            vec![
                global("api-url", Some("http://a"), 4),
                global("api-key", Some("k1"), 6),
                global("api-key", Some("k2"), 7),
                global("ssl-no-verify", None, 8),
            ]
        );
    }

    #[test]
    fn entries_before_header_have_no_section_and_subsections_are_kept() {
        let entries = parse("a = 1\n[Section \"Sub Name\"]\nb = 2\n").unwrap();
        assert_eq!(entries[0].section, None);
        assert_eq!(entries[1].section.as_deref(), Some("section"));
        assert_eq!(entries[1].subsection.as_deref(), Some("Sub Name"));
    }

    #[test]
    fn continuation_counts_lines() {
        let entries = parse("[Global]\na = x\\\ny\nb = z\n").unwrap();
        assert_eq!(entries[1].line, 4);
    }
}
