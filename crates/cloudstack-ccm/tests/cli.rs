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
