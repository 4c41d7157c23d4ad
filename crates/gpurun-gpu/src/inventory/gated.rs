//! What a GPU container gets only by naming it: IMEX channels (multi-node
//! NVLink) and the gated devices of GPUDirect Storage, MOFED/RDMA, GDRCopy
//! and NVSwitch, as the NVIDIA Container Toolkit names them.

use anyhow::{bail, Result};
use serde::Serialize;

/// A device family that comes with a GPU request only when asked for by
/// its variable (`NVIDIA_GDS=enabled`) or CDI name (`nvidia.com/gds=all`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Gated {
    Gds,
    Mofed,
    Gdrcopy,
    Nvswitch,
}

impl Gated {
    pub const ALL: [Gated; 4] = [Gated::Gds, Gated::Mofed, Gated::Gdrcopy, Gated::Nvswitch];

    pub fn env_var(self) -> &'static str {
        match self {
            Gated::Gds => "NVIDIA_GDS",
            Gated::Mofed => "NVIDIA_MOFED",
            Gated::Gdrcopy => "NVIDIA_GDRCOPY",
            Gated::Nvswitch => "NVIDIA_NVSWITCH",
        }
    }

    pub fn cdi_kind(self) -> &'static str {
        match self {
            Gated::Gds => "nvidia.com/gds",
            Gated::Mofed => "nvidia.com/mofed",
            Gated::Gdrcopy => "nvidia.com/gdrcopy",
            Gated::Nvswitch => "nvidia.com/nvswitch",
        }
    }

    pub fn from_cdi_kind(kind: &str) -> Option<Gated> {
        Gated::ALL.into_iter().find(|g| g.cdi_kind() == kind)
    }

    /// Whether the node at `path` (as the container sees it) is one of
    /// this family's: `/dev/nvidia-fs*`; `/dev/infiniband/uverbs*` and
    /// `rdma_cm`; `/dev/gdrdrv`; `/dev/nvidia-nvswitchctl` and
    /// `/dev/nvidia-nvswitch*`.
    pub fn owns(self, path: &str) -> bool {
        let numbered = |prefix: &str| {
            path.strip_prefix(prefix)
                .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        };
        match self {
            Gated::Gds => path == "/dev/nvidia-fs" || numbered("/dev/nvidia-fs"),
            Gated::Mofed => numbered("/dev/infiniband/uverbs") || path == "/dev/infiniband/rdma_cm",
            Gated::Gdrcopy => path == "/dev/gdrdrv",
            Gated::Nvswitch => {
                path == "/dev/nvidia-nvswitchctl" || numbered("/dev/nvidia-nvswitch")
            }
        }
    }
}

/// Where the host's IMEX channel nodes are; their major is the
/// `nvidia-caps-imex-channels` line of /proc/devices, their minor the id.
pub const IMEX_DIR: &str = "/dev/nvidia-caps-imex-channels";
pub const IMEX_PROC_DEVICES_NAME: &str = "nvidia-caps-imex-channels";
/// The driver's channel ids are 20 bits.
pub const MAX_IMEX_CHANNEL: u32 = (1 << 20) - 1;

/// Which IMEX channels a container asks for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase", tag = "kind", content = "ids")]
pub enum ImexChannels {
    /// `nvidia.com/imex-channel=all`: every channel the host has.
    All,
    List(Vec<u32>),
}

impl ImexChannels {
    /// What `have` (if any) and `more` ask for together.
    pub fn union(have: Option<ImexChannels>, more: ImexChannels) -> ImexChannels {
        let Some(have) = have else { return more };
        match (have, more) {
            (ImexChannels::All, _) | (_, ImexChannels::All) => ImexChannels::All,
            (ImexChannels::List(mut a), ImexChannels::List(b)) => {
                for id in b {
                    if !a.contains(&id) {
                        a.push(id);
                    }
                }
                ImexChannels::List(a)
            }
        }
    }
}

/// One channel id: `N` or `channelN`, 0 to 2^20-1.
pub fn parse_imex_channel(item: &str) -> Result<u32> {
    let digits = item.trim();
    let digits = digits.strip_prefix("channel").unwrap_or(digits);
    match digits.parse::<u32>() {
        Ok(id) if id <= MAX_IMEX_CHANNEL && !digits.starts_with('+') => Ok(id),
        _ => bail!(
            "IMEX channel {item:?}: give a channel id from 0 to {MAX_IMEX_CHANNEL} (or channelN)"
        ),
    }
}

/// A comma list of channel ids.
pub fn parse_imex_list(value: &str) -> Result<Vec<u32>> {
    let mut ids = Vec::new();
    for item in value.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let id = parse_imex_channel(item)?;
        if !ids.contains(&id) {
            ids.push(id);
        }
    }
    Ok(ids)
}

/// The major of IMEX channel nodes from /proc/devices' text.
pub fn imex_major(proc_devices: &str) -> Option<u32> {
    proc_devices.lines().find_map(|l| {
        let (major, name) = l.trim().split_once(' ')?;
        (name.trim() == IMEX_PROC_DEVICES_NAME).then(|| major.parse().ok())?
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn channel_ids_and_their_limits() {
        assert_eq!(
            parse_imex_list("0, channel7,7,1048575").unwrap(),
            [0, 7, 1048575]
        );
        for bad in ["1048576", "-1", "+3", "all", "channel", "x1", "0x10"] {
            assert!(parse_imex_channel(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_imex_major_is_read_from_proc_devices() {
        let text = "Character devices:\n195 nvidia-frontend\n234 nvidia-caps-imex-channels\n\nBlock devices:\n  8 sd\n";
        assert_eq!(imex_major(text), Some(234));
        assert_eq!(imex_major("Character devices:\n195 nvidia\n"), None);
    }

    #[test]
    fn each_family_owns_its_nodes_only() {
        assert!(Gated::Gds.owns("/dev/nvidia-fs3") && !Gated::Gds.owns("/dev/nvidia-fsx"));
        assert!(
            Gated::Mofed.owns("/dev/infiniband/uverbs0")
                && Gated::Mofed.owns("/dev/infiniband/rdma_cm")
        );
        assert!(!Gated::Mofed.owns("/dev/infiniband/umad0"));
        assert!(Gated::Gdrcopy.owns("/dev/gdrdrv"));
        assert!(
            Gated::Nvswitch.owns("/dev/nvidia-nvswitchctl")
                && Gated::Nvswitch.owns("/dev/nvidia-nvswitch2")
        );
        assert!(!Gated::Nvswitch.owns("/dev/nvidia2"));
    }
}
