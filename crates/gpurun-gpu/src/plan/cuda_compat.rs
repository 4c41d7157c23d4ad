//! CUDA forward compatibility: an image may carry a newer CUDA user-space
//! driver in `/usr/local/cuda/compat/libcuda.so.<version>`. It is used
//! only where it is newer than the host's and made for the host's driver
//! branch, decided as the NVIDIA Container Toolkit's `enable-cuda-compat`
//! hook decides, and put first in the linker cache gpurun writes.

use std::cmp::Ordering;

use serde::{Deserialize, Serialize};

pub const COMPAT_DIR: &str = "/usr/local/cuda/compat";
/// Where an image keeps CUDA forward compatibility for an Orin (the
/// toolkit's `defaultOrinCompatContainerRoot`; `cuda-compat-orin-*`).
pub const ORIN_COMPAT_DIR: &str = "/usr/local/cuda/compat_orin";
pub const NOTE_SECTION: &str = ".note.cuda.fwd_compatibility";
const NOTE_OWNER: &str = "NVIDIA Corporation";

/// Where an image keeps CUDA forward compatibility on the host `inv`
/// describes: an Orin's own folder, else the usual one.
pub fn compat_dir(inv: &crate::inventory::Inventory) -> &'static std::path::Path {
    if inv.tegra.as_ref().is_some_and(|t| t.orin) {
        std::path::Path::new(ORIN_COMPAT_DIR)
    } else {
        std::path::Path::new(COMPAT_DIR)
    }
}

/// The JSON in the library's `.note.cuda.fwd_compatibility`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
pub struct CompatNote {
    #[serde(rename = "CUDA Version", default)]
    pub cuda_version: String,
    /// The host driver branches (majors) the library runs on.
    #[serde(rename = "Driver", default)]
    pub driver: Vec<u32>,
}

/// The note from a section's bytes (`Elf_Nhdr`, owner, description), as
/// the toolkit reads it: the owner padded to the section's alignment.
/// `None` for anything else.
pub fn parse_note(section: &[u8], align: u64) -> Option<CompatNote> {
    let u32_at = |at: usize| {
        Some(u32::from_le_bytes(
            section.get(at..at + 4)?.try_into().ok()?,
        ))
    };
    let (name_size, desc_size) = (u32_at(0)? as usize, u32_at(4)? as usize);
    if name_size == 0 || desc_size == 0 {
        return None;
    }
    let align = (align.max(1) as usize).min(64);
    let name_padded = name_size.div_ceil(align) * align;
    let trim = |b: &[u8]| -> Vec<u8> {
        let start = b.iter().position(|&c| c != 0).unwrap_or(b.len());
        let end = b.iter().rposition(|&c| c != 0).map_or(start, |e| e + 1);
        b[start..end.max(start)].to_vec()
    };
    let name = trim(section.get(12..12 + name_padded.min(section.len().saturating_sub(12)))?);
    if name != NOTE_OWNER.as_bytes() {
        return None;
    }
    let from = 12 + name_padded;
    let desc = trim(section.get(from..from.checked_add(desc_size)?.min(section.len()))?);
    serde_json::from_slice(&desc).ok()
}

/// Dotted versions compared number by number (`99.1` < `222.0`).
pub fn version_cmp(a: &str, b: &str) -> Ordering {
    let parts = |v: &str| -> Vec<u64> { v.split('.').map(|p| p.parse().unwrap_or(0)).collect() };
    parts(a).cmp(&parts(b))
}

fn major(version: &str) -> Option<u32> {
    version.split('.').next()?.parse().ok()
}

/// Whether a compat library of `compat_version` (from its file name) and
/// `note` is used on a host with driver `host_driver` and CUDA
/// `host_cuda`, and why.
pub fn decide(
    compat_version: &str,
    note: Option<&CompatNote>,
    host_driver: &str,
    host_cuda: Option<&str>,
) -> (bool, String) {
    let Some(host_major) = major(host_driver) else {
        return by_cuda_version(note, host_driver, host_cuda);
    };
    match note {
        Some(note) if !note.driver.is_empty() => {
            if !note.driver.contains(&host_major) {
                return (
                    false,
                    format!(
                        "its {NOTE_SECTION} lists driver branches {:?}, not the host's {host_major}",
                        note.driver
                    ),
                );
            }
            if version_cmp(compat_version, host_driver) == Ordering::Greater {
                (true, format!("the host's branch {host_major} is in its Driver list and {compat_version} is newer than the host's {host_driver}"))
            } else {
                (false, format!("{compat_version} is not newer than the host's {host_driver}"))
            }
        }
        Some(note) => match host_cuda {
            Some(host) if !note.cuda_version.is_empty() && version_cmp(&note.cuda_version, host) == Ordering::Greater => {
                (true, format!("its CUDA {} is newer than the host's {host}", note.cuda_version))
            }
            _ => (
                false,
                format!(
                    "its CUDA {:?} is not newer than the host's {}",
                    note.cuda_version,
                    host_cuda.unwrap_or("unknown")
                ),
            ),
        },
        None => match major(compat_version) {
            Some(m) if m > host_major => (true, format!("no {NOTE_SECTION}; its major {m} is newer than the host's {host_major}")),
            _ => (false, format!("no {NOTE_SECTION}; {compat_version} is not a newer major than the host's {host_driver}")),
        },
    }
}

/// Where the host's driver branch is unknown (a Tegra host, whose NVML
/// gives the CUDA version alone): the note's CUDA version against the
/// host's, as the toolkit's `--host-cuda-version` decides.
fn by_cuda_version(
    note: Option<&CompatNote>,
    host_driver: &str,
    host_cuda: Option<&str>,
) -> (bool, String) {
    let Some(host) = host_cuda else {
        return (
            false,
            format!("the host driver version {host_driver:?} is unknown"),
        );
    };
    match note {
        Some(note) if !note.cuda_version.is_empty() => {
            if version_cmp(&note.cuda_version, host) == Ordering::Greater {
                (
                    true,
                    format!(
                        "its CUDA {} is newer than the host's {host}",
                        note.cuda_version
                    ),
                )
            } else {
                (
                    false,
                    format!(
                        "its CUDA {} is not newer than the host's {host}",
                        note.cuda_version
                    ),
                )
            }
        }
        _ => (
            false,
            format!("no CUDA version in a {NOTE_SECTION}, and the host's driver branch is unknown"),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn note_bytes(json: &str, align: usize) -> Vec<u8> {
        let mut name = NOTE_OWNER.as_bytes().to_vec();
        name.push(0);
        let mut out = Vec::new();
        out.extend_from_slice(&(name.len() as u32).to_le_bytes());
        out.extend_from_slice(&(json.len() as u32).to_le_bytes());
        out.extend_from_slice(&1u32.to_le_bytes());
        out.extend_from_slice(&name);
        while (out.len() - 12) % align != 0 {
            out.push(0);
        }
        out.extend_from_slice(json.as_bytes());
        out
    }

    #[test]
    fn the_note_is_read_at_both_alignments_and_garbage_is_none() {
        let json = r#"{"Format":1,"CUDA Version":"12.9","Driver":[535,550,570],"Device":[1,2]}"#;
        for align in [4, 8] {
            let note = parse_note(&note_bytes(json, align), align as u64).unwrap();
            assert_eq!(note.cuda_version, "12.9");
            assert_eq!(note.driver, [535, 550, 570]);
        }
        assert!(parse_note(b"", 4).is_none());
        assert!(parse_note(&[0xff; 40], 4).is_none());
        let mut other = note_bytes(json, 4);
        other[12] = b'X';
        assert!(parse_note(&other, 4).is_none());
        let huge = [255u8, 255, 255, 255, 255, 255, 255, 255, 0, 0, 0, 0];
        assert!(parse_note(&huge, 4).is_none());
    }

    #[test]
    fn the_toolkits_rules() {
        let listed = CompatNote {
            cuda_version: "12.9".into(),
            driver: vec![535, 550, 570, 575],
        };
        let unlisted = CompatNote {
            cuda_version: "12.9".into(),
            driver: vec![550, 570],
        };
        let cuda_only = CompatNote {
            cuda_version: "12.9".into(),
            driver: vec![],
        };
        let host = ("535.309.01", Some("12.2"));
        for (version, note, want) in [
            ("575.57.08", Some(&listed), true),
            ("535.309.01", Some(&listed), false),
            ("535.400.01", Some(&listed), true),
            ("575.57.08", Some(&unlisted), false),
            ("575.57.08", Some(&cuda_only), true),
            ("575.57.08", None, true),
            ("535.999.99", None, false),
            ("530.30.02", None, false),
        ] {
            let (used, why) = decide(version, note, host.0, host.1);
            assert_eq!(used, want, "{version} {note:?}: {why}");
        }
        let (used, _) = decide("575.57.08", None, "99.1.1", None);
        assert!(used, "numeric, not textual");
    }

    #[test]
    fn with_the_host_cuda_version_alone_the_notes_cuda_version_decides() {
        let orin = CompatNote {
            cuda_version: "12.9".into(),
            driver: vec![535, 550],
        };
        for (host_cuda, note, want) in [
            (Some("12.2"), Some(&orin), true),
            (Some("12.9"), Some(&orin), false),
            (Some("12.10"), Some(&orin), false),
            (Some("12.2"), None, false),
            (None, Some(&orin), false),
        ] {
            let (used, why) = decide("1.1", note, "unknown", host_cuda);
            assert_eq!(used, want, "{host_cuda:?} {note:?}: {why}");
        }
    }
}
