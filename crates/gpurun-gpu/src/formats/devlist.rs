//! `NVIDIA_VISIBLE_DEVICES`: which GPUs a container asks for.

use std::fmt;

use anyhow::{bail, Result};
use serde::Serialize;

/// The whole value of `NVIDIA_VISIBLE_DEVICES`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase", tag = "kind", content = "devices")]
pub enum DeviceSelection {
    /// Unset, empty or `void`: a plain container, nothing injected.
    Void,
    /// `none`: the driver's files, but no GPU.
    None,
    /// `all`: every GPU.
    All,
    /// A list of GPUs, MIG devices or CDI names.
    List(Vec<DeviceRef>),
}

/// One entry of a device list.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "camelCase", tag = "by")]
pub enum DeviceRef {
    /// `0`, `1`: a GPU by its NVML index.
    Index { index: u32 },
    /// `GPU-<uuid>`.
    Uuid { uuid: String },
    /// `MIG-<uuid>` (or the older `MIG-GPU-<uuid>/<gi>/<ci>`).
    MigUuid { uuid: String },
    /// `0:1`: MIG device 1 of GPU 0.
    MigIndex { gpu: u32, mig: u32 },
    /// `nvidia.com/gpu=0`: a CDI device name.
    Cdi { kind: String, name: String },
}

impl fmt::Display for DeviceRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeviceRef::Index { index } => write!(f, "{index}"),
            DeviceRef::Uuid { uuid } | DeviceRef::MigUuid { uuid } => write!(f, "{uuid}"),
            DeviceRef::MigIndex { gpu, mig } => write!(f, "{gpu}:{mig}"),
            DeviceRef::Cdi { kind, name } => write!(f, "{kind}={name}"),
        }
    }
}

/// Longer values are no device list; refusing them keeps errors short.
const MAX_LEN: usize = 4096;

/// Parses a device list value; `None` means the variable is unset.
pub fn parse(value: Option<&str>) -> Result<DeviceSelection> {
    let Some(value) = value else {
        return Ok(DeviceSelection::Void);
    };
    if value.len() > MAX_LEN {
        bail!(
            "NVIDIA_VISIBLE_DEVICES is {} bytes long: give indexes, UUIDs or \"all\"",
            value.len()
        );
    }
    let trimmed = value.trim();
    match trimmed {
        "" | "void" => return Ok(DeviceSelection::Void),
        "none" => return Ok(DeviceSelection::None),
        "all" => return Ok(DeviceSelection::All),
        _ => {}
    }
    let mut devices = Vec::new();
    for item in trimmed.split(',').map(str::trim) {
        if item.is_empty() {
            continue;
        }
        let device = parse_one(item)?;
        if !devices.contains(&device) {
            devices.push(device);
        }
    }
    if devices.is_empty() {
        bail!(
            "NVIDIA_VISIBLE_DEVICES {value:?} names no device: give indexes (0,1), UUIDs, \"all\" or \"none\""
        );
    }
    Ok(DeviceSelection::List(devices))
}

fn parse_one(item: &str) -> Result<DeviceRef> {
    if let Ok(index) = item.parse::<u32>() {
        return Ok(DeviceRef::Index { index });
    }
    if let Some((gpu, mig)) = item.split_once(':') {
        if let (Ok(gpu), Ok(mig)) = (gpu.parse::<u32>(), mig.parse::<u32>()) {
            return Ok(DeviceRef::MigIndex { gpu, mig });
        }
    }
    if let Some(rest) = item.strip_prefix("GPU-") {
        if is_uuid(rest) {
            return Ok(DeviceRef::Uuid {
                uuid: item.to_ascii_lowercase().replacen("gpu-", "GPU-", 1),
            });
        }
        bail!("NVIDIA_VISIBLE_DEVICES: {item:?} is not a GPU UUID (GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx)");
    }
    if let Some(rest) = item.strip_prefix("MIG-") {
        if is_uuid(rest) || is_legacy_mig(rest) {
            return Ok(DeviceRef::MigUuid {
                uuid: item.to_owned(),
            });
        }
        bail!("NVIDIA_VISIBLE_DEVICES: {item:?} is not a MIG device UUID (MIG-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx)");
    }
    if let Some((kind, name)) = item.split_once('=') {
        if is_cdi_kind(kind) && is_cdi_name(name) {
            return Ok(DeviceRef::Cdi {
                kind: kind.to_owned(),
                name: name.to_owned(),
            });
        }
        bail!("NVIDIA_VISIBLE_DEVICES: {item:?} is not a CDI device name (vendor.com/class=name)");
    }
    bail!(
        "NVIDIA_VISIBLE_DEVICES: {:?} is not a GPU index, UUID, MIG device or CDI name",
        truncate(item)
    )
}

fn truncate(s: &str) -> String {
    s.chars().take(64).collect()
}

/// `8-4-4-4-12` hex digits.
pub fn is_uuid(s: &str) -> bool {
    let groups: Vec<&str> = s.split('-').collect();
    groups.len() == 5
        && groups
            .iter()
            .zip([8, 4, 4, 4, 12])
            .all(|(g, n)| g.len() == n && g.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// `GPU-<uuid>/<gi>/<ci>`, the pre-R470 MIG naming.
fn is_legacy_mig(s: &str) -> bool {
    let mut parts = s.split('/');
    let (Some(gpu), Some(gi), Some(ci), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return false;
    };
    gpu.strip_prefix("GPU-").is_some_and(is_uuid)
        && gi.parse::<u32>().is_ok()
        && ci.parse::<u32>().is_ok()
}

/// `vendor.com/class`: a domain, one slash, a class name.
pub fn is_cdi_kind(kind: &str) -> bool {
    let Some((vendor, class)) = kind.split_once('/') else {
        return false;
    };
    let label = |s: &str, extra: &[u8]| {
        !s.is_empty()
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || extra.contains(&b))
            && s.as_bytes()[0].is_ascii_alphanumeric()
    };
    vendor.contains('.') && label(vendor, b"-_.") && label(class, b"-_.")
}

/// A CDI device name: letters, digits and `-_.:`, starting with an
/// alphanumeric character.
pub fn is_cdi_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 253
        && name.as_bytes()[0].is_ascii_alphanumeric()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.:".contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keywords() {
        assert_eq!(parse(None).unwrap(), DeviceSelection::Void);
        assert_eq!(parse(Some("")).unwrap(), DeviceSelection::Void);
        assert_eq!(parse(Some("void")).unwrap(), DeviceSelection::Void);
        assert_eq!(parse(Some("none")).unwrap(), DeviceSelection::None);
        assert_eq!(parse(Some(" all ")).unwrap(), DeviceSelection::All);
    }

    #[test]
    fn lists() {
        let sel = parse(Some(
            "0, 1,0,GPU-8a3e1a2b-1c2d-3e4f-5a6b-7c8d9e0f1a2b,1:2,nvidia.com/gpu=all",
        ))
        .unwrap();
        let DeviceSelection::List(list) = sel else {
            panic!()
        };
        assert_eq!(
            list,
            vec![
                DeviceRef::Index { index: 0 },
                DeviceRef::Index { index: 1 },
                DeviceRef::Uuid {
                    uuid: "GPU-8a3e1a2b-1c2d-3e4f-5a6b-7c8d9e0f1a2b".into()
                },
                DeviceRef::MigIndex { gpu: 1, mig: 2 },
                DeviceRef::Cdi {
                    kind: "nvidia.com/gpu".into(),
                    name: "all".into()
                },
            ]
        );
    }

    #[test]
    fn mig_uuids() {
        for ok in [
            "MIG-8a3e1a2b-1c2d-3e4f-5a6b-7c8d9e0f1a2b",
            "MIG-GPU-8a3e1a2b-1c2d-3e4f-5a6b-7c8d9e0f1a2b/1/0",
        ] {
            assert!(
                matches!(parse(Some(ok)).unwrap(), DeviceSelection::List(_)),
                "{ok}"
            );
        }
    }

    #[test]
    fn hostile_values_are_errors_not_panics() {
        for bad in [
            "GPU-../../etc/passwd",
            "GPU-8a3e1a2b-1c2d-3e4f-5a6b-7c8d9e0f1a2b/../x",
            "MIG-x",
            ",,,",
            "nvidia.com/gpu=../x",
            "foo=bar",
            "-1",
            "a\0b",
            "99999999999999999999",
            "💥",
        ] {
            assert!(parse(Some(bad)).is_err(), "{bad:?}");
        }
        assert!(parse(Some(&"0,".repeat(5000))).is_err());
    }
}
