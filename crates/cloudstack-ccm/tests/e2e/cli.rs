//! The binary's command line: `--help` lists every flag; bad start-up input prints one
//! line naming the problem and exits non-zero.

use std::process::{Command, Output};

const BINARY: &str = env!("CARGO_BIN_EXE_cloudstack-ccm");

fn run(args: &[&str]) -> Output {
    Command::new(BINARY)
        .args(args)
        .env_remove("CLOUDSTACK_API_URL")
        .env_remove("CLOUDSTACK_API_KEY")
        .env_remove("CLOUDSTACK_SECRET_KEY")
        .env_remove("RUST_LOG")
        .output()
        .expect("the binary runs")
}

/// Asserts a failed start with exactly one line on stderr containing `fragment`.
fn assert_one_line_failure(output: &Output, fragment: &str) {
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "must fail: {stderr}");
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "one line expected, got {stderr:?}");
    assert!(
        lines[0].contains(fragment),
        "{fragment:?} not in {:?}",
        lines[0]
    );
}

fn config_file(text: &str) -> tempfile::NamedTempFile {
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), text).unwrap();
    file
}

#[test]
fn help_lists_every_flag() {
    let output = run(&["--help"]);
    assert!(output.status.success());
    let help = String::from_utf8(output.stdout).unwrap();
    for flag in [
        "--cloud-provider",
        "--cloud-config",
        "--kubeconfig",
        "--master",
        "--controllers",
        "--cluster-name",
        "--concurrent-service-syncs",
        "--node-status-update-frequency",
        "--node-monitor-period",
        "--service-resync-period",
        "--load-balancer-class",
        "--leader-elect[=<BOOL>]",
        "--leader-elect-lease-duration",
        "--leader-elect-renew-deadline",
        "--leader-elect-retry-period",
        "--leader-elect-resource-name",
        "--leader-elect-resource-namespace",
        "--leader-elect-resource-lock",
        "--bind-address",
        "--secure-port",
        "--insecure-plain-http",
        "--tls-cert-file",
        "--cert-dir",
        "--authorization-always-allow-paths",
        "-v, --v",
        "--log-format",
        "--allocate-node-cidrs",
        "--configure-cloud-routes",
        "--cluster-cidr",
        "--delete-orphans",
        "demo",
        "plan",
        "orphans",
    ] {
        assert!(help.contains(flag), "--help lacks {flag}:\n{help}");
    }
}

#[test]
fn missing_key_fails_with_one_line() {
    let file = config_file("[Global]\napi-url = http://127.0.0.1:1/client/api\napi-key = AK\n");
    let path = file.path().to_str().unwrap();
    let output = run(&[
        "--cloud-provider=external-cloudstack",
        &format!("--cloud-config={path}"),
        "--leader-elect=true",
    ]);
    assert_one_line_failure(&output, "required key secret-key is missing");
}

#[test]
fn unknown_key_fails_with_one_line_naming_key_and_line() {
    let file = config_file(
        "[Global]\napi-url = http://x/client/api\napi-key = AK\nsecret-key = SK\napi-secret = x\n",
    );
    let path = file.path().to_str().unwrap();
    let output = run(&[&format!("--cloud-config={path}")]);
    assert_one_line_failure(&output, "line 5: unknown key \"api-secret\"");
    assert!(
        !String::from_utf8_lossy(&output.stderr).contains("SK"),
        "no secret in the message"
    );
}

#[test]
fn unreadable_file_fails_with_one_line_naming_the_path() {
    let output = run(&["--cloud-config=/nonexistent/cloud-config"]);
    assert_one_line_failure(
        &output,
        "cannot read cloud-config /nonexistent/cloud-config",
    );
}

#[test]
fn bad_flags_fail_clearly() {
    let output = run(&["--cloud-provider=aws"]);
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("unsupported cloud provider \"aws\""));
    let output = run(&["--controllers=*,-ipam"]);
    assert_one_line_failure(&output, "unknown controller \"-ipam\"");
}

#[test]
fn ignored_flags_warn_and_do_not_crash() {
    // The start fails later (no cloud-config), after the warnings are logged.
    let output = run(&[
        "--profiling=false",
        "--node-cidr-mask-size",
        "24",
        "--contention-profiling",
    ]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    for flag in [
        "--profiling",
        "--node-cidr-mask-size",
        "--contention-profiling",
    ] {
        assert!(
            stderr.contains(&format!("flag {flag} does not apply")),
            "{flag}: {stderr}"
        );
    }
    assert!(
        stderr.contains("required key api-url is missing"),
        "{stderr}"
    );
}

#[test]
fn logs_through_a_pipe_carry_no_colour_escapes() {
    // Output::stderr is a pipe, as under `kubectl logs`; the ignored-flag warnings and the
    // error are logged before the start fails.
    let output = run(&["--profiling=false"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("flag --profiling does not apply"),
        "{stderr}"
    );
    assert!(!stderr.contains('\u{1b}'), "no ANSI escapes: {stderr:?}");

    let output = run(&["--profiling=false", "--log-format=json"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let mut logged = 0;
    for line in stderr.lines().filter(|l| l.starts_with('{')) {
        let record: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("a JSON log line: {e}: {line:?}"));
        assert!(record.get("level").is_some(), "{line}");
        logged += 1;
    }
    assert!(logged >= 1, "{stderr}");
    assert!(!stderr.contains('\u{1b}'), "{stderr:?}");
}

#[test]
fn a_bad_flag_value_fails_with_one_line_naming_the_flag_and_exit_code_2() {
    for (flag, name) in [
        ("--node-monitor-period=soon", "--node-monitor-period"),
        ("--secure-port=http", "--secure-port"),
        ("--leader-elect=maybe", "--leader-elect"),
        ("--tls-min-version=VersionTLS10", "--tls-min-version"),
        (
            "--tls-cipher-suites=TLS_RSA_WITH_AES_128_CBC_SHA",
            "--tls-cipher-suites",
        ),
        ("--no-such-flag", "--no-such-flag"),
    ] {
        let output = run(&[flag]);
        assert_eq!(output.status.code(), Some(2), "{flag}: usage error");
        assert_one_line_failure(&output, name);
        let line = String::from_utf8_lossy(&output.stderr);
        assert!(line.starts_with("cloudstack-ccm: error: "), "{line}");
    }
    // --help and --version still print in full and succeed.
    assert!(run(&["--version"]).status.success());
}

#[test]
fn an_empty_unknown_section_fails_with_one_line_naming_it() {
    let file = config_file(
        "[Global]\napi-url = http://127.0.0.1:1/client/api\napi-key = AK\nsecret-key = SK\n[Globl]\n",
    );
    let path = file.path().to_str().unwrap();
    let output = run(&[&format!("--cloud-config={path}")]);
    assert_one_line_failure(&output, "line 5: unknown section [globl]");
}

#[test]
fn global_flags_are_accepted_after_a_subcommand() {
    // `plan` with its flags after the subcommand reads the same cloud-config (which
    // here is missing a key, so it fails on that, not on the command line).
    let file = config_file("[Global]\napi-url = http://127.0.0.1:1/client/api\napi-key = AK\n");
    let path = file.path().to_str().unwrap();
    for args in [
        vec!["plan".to_string(), format!("--cloud-config={path}")],
        vec![format!("--cloud-config={path}"), "plan".to_string()],
        vec![
            "plan".to_string(),
            "--cloud-config".to_string(),
            path.to_string(),
            "-v=2".to_string(),
        ],
    ] {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let output = run(&args);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success());
        assert!(
            stderr.contains("required key secret-key is missing"),
            "{args:?}: {stderr}"
        );
    }
}
