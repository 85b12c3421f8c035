//! `demo --serve` run as the binary: every command line it prints works as printed
//! (`kubectl`, Debian's `python3-cs`, `curl`, the dry run), and the marks of the progress
//! lines are explained.
//!
//! A printed command whose program is not installed here is skipped with a loud notice
//! (as `deploy_manifests.rs` does for `kubectl` and `helm`).

use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_cloudstack-ccm");

/// A `python3` that can import `cs` (the `PATH`'s, else the system's, which a version
/// manager may shadow), as a directory to put first on `PATH`.
fn python_with_cs() -> Option<String> {
    for python in ["python3", "/usr/bin/python3"] {
        let imports = std::process::Command::new(python)
            .args(["-c", "import cs"])
            .output()
            .is_ok_and(|out| out.status.success());
        if imports {
            return Some(match python.rsplit_once('/') {
                Some((dir, _)) => dir.to_string(),
                None => String::new(),
            });
        }
    }
    None
}

/// Whether `program` runs here.
fn installed(program: &str) -> bool {
    std::process::Command::new(program)
        .arg("--help")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok()
}

#[tokio::test(flavor = "multi_thread")]
async fn every_printed_command_works_as_printed() {
    let mut demo = Command::new(BIN)
        .args(["demo", "--serve"])
        .env("NO_COLOR", "1")
        .env_remove("RUST_LOG")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("the demo starts");
    let mut lines = BufReader::new(demo.stdout.take().unwrap()).lines();
    let mut printed = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(120), async {
        let mut dry_run_next = false;
        while let Some(line) = lines.next_line().await.expect("stdout") {
            printed.push(line.clone());
            if dry_run_next {
                return;
            }
            dry_run_next = line.starts_with("Dry run against both");
        }
        panic!("the demo ended before printing its commands");
    })
    .await;
    assert!(read.is_ok(), "no commands within 120 s: {printed:#?}");
    let output = printed.join("\n");
    assert!(
        output.contains("> the demo acts") && output.contains("+ a change the controllers made"),
        "the marks are explained: {output}"
    );

    let commands: Vec<&str> = printed
        .iter()
        .map(|line| line.trim())
        .filter(|line| {
            ["kubectl ", "python3 ", "curl ", "CLOUDSTACK_ENDPOINT="]
                .iter()
                .any(|start| line.starts_with(start))
                || line.contains("cloudstack-ccm plan ")
        })
        .collect();
    assert!(commands.len() >= 8, "{output}");
    // The program a command line runs: its first word after `NAME=value` settings.
    let program_of = |command: &str| -> String {
        command
            .split_whitespace()
            .find(|word| !word.contains('='))
            .unwrap_or_default()
            .to_string()
    };
    assert!(
        !commands.iter().any(|c| program_of(c) == "cs"),
        "python3-cs installs no `cs` command: {output}"
    );
    let python_dir = python_with_cs();
    let path = match &python_dir {
        Some(dir) if !dir.is_empty() => {
            format!("{dir}:{}", std::env::var("PATH").unwrap_or_default())
        }
        _ => std::env::var("PATH").unwrap_or_default(),
    };
    // The delete goes last: the others read the Service.
    let (deletes, others): (Vec<&str>, Vec<&str>) =
        commands.iter().partition(|c| c.contains(" delete "));
    let mut ran = 0;
    let mut shown_events = 0;
    for command in others.into_iter().chain(deletes) {
        let needs_cs = command.contains("python3");
        let program = program_of(command);
        let program = program.as_str();
        if (needs_cs && python_dir.is_none()) || (!needs_cs && !installed(program)) {
            eprintln!(
                "\n!!! NOTICE: not run (needs {program}{}): {command}\n",
                if needs_cs { " with python3-cs" } else { "" }
            );
            continue;
        }
        let result = tokio::time::timeout(
            Duration::from_secs(60),
            Command::new("sh")
                .args(["-c", command])
                .env("PATH", &path)
                .env("NO_COLOR", "1")
                .output(),
        )
        .await
        .unwrap_or_else(|_| panic!("{command} did not finish"))
        .expect("sh runs");
        let stdout = String::from_utf8_lossy(&result.stdout);
        assert!(
            result.status.success(),
            "{command}\nstdout: {stdout}\nstderr: {}",
            String::from_utf8_lossy(&result.stderr)
        );
        // What the commands are printed for must be there: the Events of the demo's
        // Service and Nodes, the Service's address.
        if command.starts_with("kubectl ") && command.contains(" events") {
            shown_events += 1;
            assert!(
                ["EnsuredLoadBalancer", "EnsuringLoadBalancer", "Synced"]
                    .iter()
                    .any(|reason| stdout.contains(reason)),
                "{command} shows the demo's Events:\n{stdout}"
            );
        }
        if command.starts_with("kubectl ") && command.contains(" describe ") {
            shown_events += 1;
            let events = stdout.split("Events:").nth(1).unwrap_or_default();
            assert!(
                events.lines().any(|line| line.contains("Normal")),
                "{command} lists Events:\n{stdout}"
            );
        }
        ran += 1;
    }
    println!("ran {ran} of {} printed commands", commands.len());
    assert!(ran >= 1);
    if installed("kubectl") {
        assert!(
            shown_events >= 2,
            "the printed kubectl commands show Events: {output}"
        );
    }

    if let Some(pid) = demo.id() {
        let _ = std::process::Command::new("kill")
            .args(["-INT", &pid.to_string()])
            .status();
    }
    let _ = tokio::time::timeout(Duration::from_secs(30), demo.wait()).await;
}
