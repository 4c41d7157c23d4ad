//! `cri-client SOCKET HANDLER IMAGE LOGDIR SCRIPT [K=V...]`: what a kubelet
//! does for one pod, without a kubelet. RunPodSandbox (host network,
//! `runtime_handler = HANDLER`), CreateContainer and StartContainer with
//! `sh -c SCRIPT` and the environment, waits for it to exit, prints its log
//! and `exit_code=N`, then stops and removes the pod.
//!
//! A mid-run phase, for checks that must hold through a change on the host
//! (set in cri-client's own environment): `CRI_CLIENT_SYNC=HOSTDIR` mounts
//! HOSTDIR at /sync in the container; once the container's log shows a
//! line `phase=1`, the client sends UpdateContainerResources with a memory
//! limit of `CRI_CLIENT_UPDATE_MEMORY` bytes (if set), runs
//! `CRI_CLIENT_BETWEEN` with `sh -c` on the host (if set), and creates
//! HOSTDIR/go, which the script can wait for.
//! `CRI_CLIENT_CGROUP_PARENT=NAME.slice` gives the pod the cgroup parent a
//! kubelet on the systemd driver gives it (containerd then hands the
//! runtime `NAME.slice:cri-containerd:ID`).
//! `CRI_CLIENT_DEVICE_MOUNTS=1,2` allocates GPUs as the NVIDIA device
//! plugin's volume-mounts strategy does: `/dev/null` mounted at
//! `/var/run/nvidia-container-devices/<device>`.
//! `CRI_CLIENT_CDI_DEVICES=nvidia.com/gpu=0,...` asks for CDI devices in the
//! container's config (`CDIDevices`, as the device plugin's `cdi-cri`
//! strategy and DRA do): containerd 2.x applies their edits itself.
//! `CRI_CLIENT_USERNS=HOSTID:LENGTH` gives the pod a user namespace of its
//! own (Kubernetes' `hostUsers: false`): ids 0..LENGTH map to HOSTID on,
//! and a network namespace of its own (CNI must be configured).
//! `CRI_CLIENT_VOLUME=HOSTDIR` mounts HOSTDIR read-write at /volume (in such
//! a pod with the pod's mappings, as the kubelet asks: an idmapped mount).

use std::time::Duration;

use anyhow::{bail, Context, Result};
use k8s_cri::v1::runtime_service_client::RuntimeServiceClient;
use k8s_cri::v1::*;
use tonic::transport::{Channel, Endpoint, Uri};

async fn connect(socket: String) -> Result<Channel> {
    // The URI is a placeholder: the connector dials the unix socket.
    Endpoint::try_from("http://[::]:50051")?
        .connect_with_connector(tower::service_fn(move |_: Uri| {
            let socket = socket.clone();
            async move {
                Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(
                    tokio::net::UnixStream::connect(socket).await?,
                ))
            }
        }))
        .await
        .context("connect to the CRI socket")
}

/// Waits for `phase=1` in the container's log, then updates its memory
/// limit, runs the host command, and lets the container go on.
async fn mid_run_phase(
    client: &mut RuntimeServiceClient<Channel>,
    container: &str,
    log_dir: &str,
    sync_dir: &str,
) -> Result<()> {
    let log = std::path::Path::new(log_dir).join("main.log");
    let mut seen = false;
    for _ in 0..600 {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        if text.lines().any(|line| line.ends_with(" phase=1")) {
            seen = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    if !seen {
        bail!("the container's log never showed phase=1");
    }
    if let Ok(bytes) = std::env::var("CRI_CLIENT_UPDATE_MEMORY") {
        client
            .update_container_resources(UpdateContainerResourcesRequest {
                container_id: container.into(),
                linux: Some(LinuxContainerResources {
                    memory_limit_in_bytes: bytes.parse().context("CRI_CLIENT_UPDATE_MEMORY")?,
                    ..Default::default()
                }),
                ..Default::default()
            })
            .await
            .context("UpdateContainerResources")?;
        println!("updated memory to {bytes}");
    }
    if let Ok(command) = std::env::var("CRI_CLIENT_BETWEEN") {
        let status = std::process::Command::new("sh")
            .args(["-c", &command])
            .status()
            .context("run CRI_CLIENT_BETWEEN")?;
        println!("between: {status}");
    }
    std::fs::write(std::path::Path::new(sync_dir).join("go"), "")?;
    Ok(())
}

/// `HOSTID:LENGTH` as a pod-wide user namespace mapping ids 0..LENGTH.
fn pod_user_namespace(spec: &str) -> Result<UserNamespace> {
    let (host, length) = spec
        .split_once(':')
        .context("CRI_CLIENT_USERNS is HOSTID:LENGTH")?;
    let mapping = IdMapping {
        host_id: host.parse().context("CRI_CLIENT_USERNS host id")?,
        container_id: 0,
        length: length.parse().context("CRI_CLIENT_USERNS length")?,
    };
    Ok(UserNamespace {
        mode: NamespaceMode::Pod as i32,
        uids: vec![mapping],
        gids: vec![mapping],
    })
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 6 {
        bail!("usage: cri-client SOCKET HANDLER IMAGE LOGDIR SCRIPT [K=V...]");
    }
    let (socket, handler, image, log_dir, script) =
        (&args[1], &args[2], &args[3], &args[4], &args[5]);
    let envs: Vec<KeyValue> = args[6..]
        .iter()
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| KeyValue {
            key: k.into(),
            value: v.into(),
        })
        .collect();
    let mut client = RuntimeServiceClient::new(connect(socket.clone()).await?);
    let sync_dir = std::env::var("CRI_CLIENT_SYNC").ok();
    let device_mounts: Vec<String> = std::env::var("CRI_CLIENT_DEVICE_MOUNTS")
        .unwrap_or_default()
        .split(',')
        .filter(|d| !d.is_empty())
        .map(str::to_owned)
        .collect();

    let cdi_devices: Vec<CdiDevice> = std::env::var("CRI_CLIENT_CDI_DEVICES")
        .unwrap_or_default()
        .split(',')
        .filter(|d| !d.is_empty())
        .map(|name| CdiDevice { name: name.into() })
        .collect();

    let volume = std::env::var("CRI_CLIENT_VOLUME").ok();
    let userns = std::env::var("CRI_CLIENT_USERNS")
        .ok()
        .map(|spec| pod_user_namespace(&spec))
        .transpose()?;

    // A pod with a user namespace cannot share the node's network
    // (Kubernetes refuses it, containerd cannot); each container repeats
    // the pod's namespaces, as the kubelet sends them.
    let volume_ids = userns.clone().unwrap_or_default();
    let namespaces = NamespaceOption {
        network: if userns.is_some() {
            NamespaceMode::Pod as i32
        } else {
            NamespaceMode::Node as i32
        },
        pid: NamespaceMode::Container as i32,
        ipc: NamespaceMode::Pod as i32,
        userns_options: userns,
        ..Default::default()
    };

    let uid = format!("gpurun-e2e-{}", std::process::id());
    let sandbox_config = PodSandboxConfig {
        metadata: Some(PodSandboxMetadata {
            name: "gpurun-e2e".into(),
            uid: uid.clone(),
            namespace: "default".into(),
            attempt: 0,
        }),
        log_directory: log_dir.clone(),
        linux: Some(LinuxPodSandboxConfig {
            cgroup_parent: std::env::var("CRI_CLIENT_CGROUP_PARENT").unwrap_or_default(),
            security_context: Some(LinuxSandboxSecurityContext {
                namespace_options: Some(namespaces.clone()),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    };
    let pod = client
        .run_pod_sandbox(RunPodSandboxRequest {
            config: Some(sandbox_config.clone()),
            runtime_handler: handler.clone(),
        })
        .await
        .context("RunPodSandbox")?
        .into_inner()
        .pod_sandbox_id;
    println!("pod {pod} running with handler {handler}");

    let result = async {
        let container = client
            .create_container(CreateContainerRequest {
                pod_sandbox_id: pod.clone(),
                config: Some(ContainerConfig {
                    metadata: Some(ContainerMetadata {
                        name: "main".into(),
                        attempt: 0,
                    }),
                    image: Some(ImageSpec {
                        image: image.clone(),
                        ..Default::default()
                    }),
                    command: vec!["sh".into(), "-c".into(), script.clone()],
                    envs: envs.clone(),
                    log_path: "main.log".into(),
                    mounts: sync_dir
                        .iter()
                        .map(|dir| Mount {
                            container_path: "/sync".into(),
                            host_path: dir.clone(),
                            ..Default::default()
                        })
                        .chain(volume.iter().map(|dir| Mount {
                            container_path: "/volume".into(),
                            host_path: dir.clone(),
                            // The kubelet asks for the pod's mappings on each
                            // volume of a pod with a user namespace.
                            uid_mappings: volume_ids.uids.clone(),
                            gid_mappings: volume_ids.gids.clone(),
                            ..Default::default()
                        }))
                        .chain(device_mounts.iter().map(|device| Mount {
                            container_path: format!("/var/run/nvidia-container-devices/{device}"),
                            host_path: "/dev/null".into(),
                            readonly: true,
                            ..Default::default()
                        }))
                        .collect(),
                    cdi_devices: cdi_devices.clone(),
                    linux: Some(LinuxContainerConfig {
                        security_context: Some(LinuxContainerSecurityContext {
                            namespace_options: Some(namespaces.clone()),
                            ..Default::default()
                        }),
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
                sandbox_config: Some(sandbox_config.clone()),
            })
            .await
            .context("CreateContainer")?
            .into_inner()
            .container_id;
        client
            .start_container(StartContainerRequest {
                container_id: container.clone(),
            })
            .await
            .context("StartContainer")?;
        if let Some(dir) = &sync_dir {
            mid_run_phase(&mut client, &container, log_dir, dir).await?;
        }
        for _ in 0..300 {
            let status = client
                .container_status(ContainerStatusRequest {
                    container_id: container.clone(),
                    verbose: false,
                })
                .await
                .context("ContainerStatus")?
                .into_inner()
                .status
                .context("no container status")?;
            if status.state == ContainerState::ContainerExited as i32 {
                return Ok::<i32, anyhow::Error>(status.exit_code);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        bail!("the container did not exit within 30 s")
    }
    .await;

    // CRI log lines: "<time> <stream> <F|P> <text>".
    if let Ok(log) = std::fs::read_to_string(std::path::Path::new(log_dir).join("main.log")) {
        for line in log.lines() {
            println!("{}", line.splitn(4, ' ').nth(3).unwrap_or(line));
        }
    }
    client
        .stop_pod_sandbox(StopPodSandboxRequest {
            pod_sandbox_id: pod.clone(),
        })
        .await
        .context("StopPodSandbox")?;
    client
        .remove_pod_sandbox(RemovePodSandboxRequest {
            pod_sandbox_id: pod.clone(),
        })
        .await
        .context("RemovePodSandbox")?;
    println!("pod removed");
    println!("exit_code={}", result?);
    Ok(())
}
