//! The binary's command line: `--help` documents the API and the `/sim` endpoints, and a
//! bad scenario is reported with the file and field.

use std::process::Command;

#[test]
fn help_explains_the_endpoints_and_flags() {
    let output = Command::new(env!("CARGO_BIN_EXE_cloudstack-sim"))
        .arg("--help")
        .output()
        .unwrap();
    assert!(output.status.success());
    let help = String::from_utf8(output.stdout).unwrap();
    for needle in [
        "--scenario",
        "--listen",
        "--state-file",
        "--version",
        "--job-duration",
        "/client/api",
        "/sim/faults",
        "/sim/counts",
        "/sim/vms",
    ] {
        assert!(help.contains(needle), "--help lacks {needle}:\n{help}");
    }
}

#[test]
fn a_bad_scenario_file_names_the_problem() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.toml");
    std::fs::write(&path, "[[zone]]\nname = \"z\"\n\n[[network]]\nname = \"n\"\nzone = \"nowhere\"\ncidr = \"10.0.0.0/24\"\n").unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_cloudstack-sim"))
        .args(["--listen", "127.0.0.1:0", "--scenario"])
        .arg(&path)
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("network \"n\"")
            && stderr.contains("field zone")
            && stderr.contains("nowhere"),
        "{stderr}"
    );
}
