//! Debian's `python3-cs` client drives the running `cloudstack-sim` binary: list VMs,
//! associate an IP, create an LB rule and wait for the async jobs. Skipped with a notice
//! when `import cs` fails.

use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const PYTHON: &str = "/usr/bin/python3";

const SCRIPT: &str = r#"
import json, sys
from cs import CloudStack
api = CloudStack(endpoint=sys.argv[1], key="alice-api-key", secret="alice-secret-key",
                 poll_interval=0.05, job_timeout=20, fetch_result=True)
vms = api.listVirtualMachines(listall=True, details="min,nics")
net = [n for n in api.listNetworks(listall=True)["network"] if n["name"] == "net-vr"][0]
ip = api.associateIpAddress(networkid=net["id"])
rule = api.createLoadBalancerRule(name="a1b2c3-tcp-80", algorithm="roundrobin", privateport=30080,
                                  publicport=80, publicipid=ip["ipaddress"]["id"], openfirewall=False,
                                  cidrlist="10.0.0.0/8,192.168.1.0/24", description="k8s svc ns/name")
assign = api.assignToLoadBalancerRule(id=rule["loadbalancer"]["id"],
                                      virtualmachineids=",".join(v["id"] for v in vms["virtualmachine"]))
print(json.dumps({"vms": vms, "ip": ip, "rule": rule, "assign": assign}))
"#;

/// Kills the simulator when the test ends, whatever happens.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn python_cs_available() -> bool {
    Command::new(PYTHON)
        .args(["-c", "import cs"])
        .output()
        .is_ok_and(|o| o.status.success())
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[test]
fn python3_cs_drives_the_binary() {
    if !python_cs_available() {
        println!("SKIPPED: {PYTHON} cannot `import cs` (install Debian's python3-cs)");
        return;
    }
    let port = free_port();
    let child = Command::new(env!("CARGO_BIN_EXE_cloudstack-sim"))
        .args([
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--job-duration",
            "50ms",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("binary starts");
    let mut sim = Running(child);
    let mut stdout = BufReader::new(sim.0.stdout.take().unwrap());
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut banner = String::new();
    while !banner.contains("account admin") {
        assert!(Instant::now() < deadline, "no banner: {banner}");
        let mut line = String::new();
        if stdout.read_line(&mut line).unwrap() == 0 {
            panic!("the simulator exited: {banner}");
        }
        banner.push_str(&line);
    }
    let endpoint = format!("http://127.0.0.1:{port}/client/api");
    assert!(banner.contains(&endpoint), "{banner}");
    assert!(
        banner.contains("alice-api-key") && banner.contains("alice-secret-key"),
        "built-in keys are printed"
    );

    let output = Command::new(PYTHON)
        .args(["-c", SCRIPT, &endpoint])
        .output()
        .expect("python runs");
    assert!(
        output.status.success(),
        "python3-cs failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let result: Value = serde_json::from_slice(&output.stdout).expect("script prints JSON");
    assert_eq!(result["vms"]["count"], 3);
    assert_eq!(result["ip"]["ipaddress"]["state"], "Allocated");
    let rule = &result["rule"]["loadbalancer"];
    assert_eq!(
        (rule["name"].as_str(), rule["publicport"].as_str()),
        (Some("a1b2c3-tcp-80"), Some("80"))
    );
    assert_eq!(rule["cidrlist"], "10.0.0.0/8 192.168.1.0/24");
    assert_eq!(result["assign"]["success"], true);

    let counts: Value = reqwest_free_get(port, "/sim/counts");
    assert_eq!(counts["createLoadBalancerRule"], 1);
    assert!(
        counts["queryAsyncJobResult"].as_u64().unwrap() >= 3,
        "python3-cs polled the jobs"
    );
}

/// A tiny HTTP/1.0 GET (keeps this test independent of the async runtime).
fn reqwest_free_get(port: u16, path: &str) -> Value {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    write!(stream, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, b)| b)
        .unwrap_or_default();
    serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {response}"))
}
