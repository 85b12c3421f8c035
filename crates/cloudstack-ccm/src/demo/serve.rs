//! `demo --serve`: after the scenario both servers keep running (and the controllers keep
//! reconciling), and the demo prints command lines to poke them by hand, until Ctrl-C.

use std::io::Write;
use std::path::{Path, PathBuf};

use super::error::DemoError;
use super::progress::Progress;
use super::scenario::{ACCOUNT, SERVICE};
use super::world::World;

/// The files written for the hand-made commands (removed when the demo ends).
#[derive(Debug)]
pub(crate) struct ServeFiles {
    /// The directory holding them.
    pub dir: PathBuf,
    /// A kubeconfig for the API server.
    pub kubeconfig: PathBuf,
    /// The cloud-config the controllers use.
    pub cloud_config: PathBuf,
}

impl ServeFiles {
    /// Writes the kubeconfig and the cloud-config into a fresh directory under the
    /// system's temporary directory.
    pub fn write(world: &World) -> Result<ServeFiles, DemoError> {
        let dir = std::env::temp_dir().join(format!("cloudstack-ccm-demo-{}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        let kubeconfig = dir.join("kubeconfig");
        world.apiserver.write_kubeconfig(&kubeconfig)?;
        let cloud_config = dir.join("cloud-config");
        std::fs::write(&cloud_config, &world.cloud_config)?;
        Ok(ServeFiles {
            dir,
            kubeconfig,
            cloud_config,
        })
    }

    /// Removes the directory.
    pub fn remove(self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The command lines to poke both servers. Each works as printed (the test runs them):
/// `kubectl` with the written kubeconfig, Debian's `python3-cs` as `python3 -m cs` (the
/// package installs no `cs` command), `curl` for the simulator's call counters.
pub fn instructions(world: &World, files: &ServeFiles) -> Vec<String> {
    let kube = world.apiserver.url();
    let api = world.sim.api_url();
    let (key, secret) = (
        format!("{ACCOUNT}-api-key"),
        format!("{ACCOUNT}-secret-key"),
    );
    let exe = std::env::current_exe()
        .map(|path| path.display().to_string())
        .unwrap_or_else(|_| "cloudstack-ccm".to_string());
    let shown = |path: &Path| path.display().to_string();
    let kubectl = format!("kubectl --kubeconfig {}", shown(&files.kubeconfig));
    vec![
        "Both servers keep running and the controllers keep reconciling; Ctrl-C stops them."
            .to_string(),
        String::new(),
        format!("Kubernetes API server: {kube}"),
        format!("  {kubectl} get nodes,services -o wide"),
        format!("  {kubectl} get events -A"),
        format!("  {kubectl} describe service {SERVICE}"),
        format!("  {kubectl} delete service {SERVICE}"),
        String::new(),
        format!("CloudStack simulator: {api}  (demo keys: api key {key}, secret key {secret})"),
        "  with python3-cs (Debian/Ubuntu: apt install python3-cs; else pip install cs):"
            .to_string(),
        format!(
            "  CLOUDSTACK_ENDPOINT={api} CLOUDSTACK_KEY={key} CLOUDSTACK_SECRET={secret} python3 -m cs listLoadBalancerRules"
        ),
        format!(
            "  python3 -c 'from cs import CloudStack; print(CloudStack(endpoint=\"{api}\", key=\"{key}\", secret=\"{secret}\").listPublicIpAddresses())'"
        ),
        format!(
            "  curl -s {}/calls    # every API call the controllers made",
            world.sim.admin_url()
        ),
        String::new(),
        "Dry run against both:".to_string(),
        format!(
            "  {exe} plan --cloud-config {} --kubeconfig {}",
            shown(&files.cloud_config),
            shown(&files.kubeconfig)
        ),
    ]
}

/// Prints the instructions and follows the servers until Ctrl-C.
pub async fn serve<W: Write>(
    world: &mut World,
    progress: &mut Progress<W>,
) -> Result<(), DemoError> {
    let files = ServeFiles::write(world)?;
    progress.say(&progress.style().heading("serving"))?;
    for line in instructions(world, &files) {
        progress.say(&line)?;
    }
    progress.say("")?;
    let result = progress
        .follow_until(world, async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await;
    files.remove();
    result
}
