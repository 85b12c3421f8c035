//! Command-line options of the scale benchmark (`cargo bench -p cloudstack-ccm --bench scale -- …`).

use std::path::PathBuf;

/// What to run and where to write the numbers.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Small sizes only (a smoke run of about two minutes).
    pub quick: bool,
    /// Also write every row as JSON to this file.
    pub json: Option<PathBuf>,
    /// Run only scenarios whose name contains one of these words (all when empty).
    pub filters: Vec<String>,
}

impl Options {
    /// Parses the arguments after `--` (cargo adds `--bench`, which is ignored).
    pub fn parse(args: impl IntoIterator<Item = String>) -> anyhow::Result<Self> {
        let mut options = Options::default();
        let mut args = args.into_iter();
        while let Some(arg) = args.next() {
            match arg.as_str() {
                "--quick" => options.quick = true,
                "--json" => {
                    let path = args
                        .next()
                        .ok_or_else(|| anyhow::anyhow!("--json: a file path must follow"))?;
                    options.json = Some(PathBuf::from(path));
                }
                "--bench" | "--nocapture" => {}
                "--help" | "-h" => {
                    println!(
                        "usage: cargo bench -p cloudstack-ccm --bench scale -- [--quick] [--json FILE] [FILTER…]\n\
                         filters: nodes, refresh, lb, burst, steady, churn, memory, memory-n1000, memory-n5000 (substring of a scenario name)"
                    );
                    std::process::exit(0);
                }
                other if other.starts_with("--json=") => {
                    options.json = Some(PathBuf::from(&other["--json=".len()..]));
                }
                other if other.starts_with('-') => {
                    anyhow::bail!("unknown option {other:?} (try --help)")
                }
                filter => options.filters.push(filter.to_owned()),
            }
        }
        Ok(options)
    }

    /// Whether the scenario named `name` (e.g. `nodes-init`) is selected.
    pub fn selects(&self, name: &str) -> bool {
        self.filters.is_empty() || self.filters.iter().any(|f| name.contains(f.as_str()))
    }
}
