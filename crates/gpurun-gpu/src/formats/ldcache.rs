//! glibc's `/etc/ld.so.cache`, read and written natively (no `ldconfig`).
//!
//! The new format (`glibc-ld.so.cache1.1`, glibc ≥ 2.32 writes only this):
//! a 48-byte header, `nlibs` 24-byte entries sorted for glibc's binary
//! search, then a string table. String offsets count from the header. An
//! image's cache is untrusted input: every offset and count is checked.

use std::cmp::Ordering;

use anyhow::{bail, Result};
use serde::Serialize;

const MAGIC_NEW: &[u8; 20] = b"glibc-ld.so.cache1.1";
const MAGIC_OLD: &[u8; 11] = b"ld.so-1.7.0";
const HEADER_LEN: usize = 48;
const ENTRY_LEN: usize = 24;
const OLD_ENTRY_LEN: usize = 12;
const ENDIAN_LITTLE: u8 = 2;
/// No real cache comes near this; a bigger count is hostile.
const MAX_ENTRIES: usize = 1 << 20;
/// Strings may be shared by many entries, so a small file can name a huge
/// amount of text (30,000 entries sharing one 4 KiB string): the decoded
/// strings are bounded too. A real cache decodes to well under 1 MiB.
const MAX_DECODED_BYTES: usize = 8 << 20;

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Entry {
    /// The name a program asks for (a SONAME such as `libcuda.so.1`).
    pub name: String,
    /// The file the loader opens.
    pub path: String,
    pub flags: i32,
    pub hwcap: u64,
}

/// Parses a cache file. Errors on anything malformed; never panics.
pub fn parse(bytes: &[u8]) -> Result<Vec<Entry>> {
    let mut base = 0usize;
    if bytes.starts_with(MAGIC_OLD) {
        // Old format first, new format after it (glibc < 2.32 "compat").
        let n = read_u32(bytes, MAGIC_OLD.len())? as usize;
        if n > MAX_ENTRIES {
            bail!("ld.so.cache: old-format count {n} is impossible");
        }
        let end = MAGIC_OLD.len() + 4 + n * OLD_ENTRY_LEN;
        base = (end + 7) & !7;
        if !bytes.get(base..).is_some_and(|b| b.starts_with(MAGIC_NEW)) {
            bail!("ld.so.cache: old format without a new-format part is not supported");
        }
    }
    let cache = &bytes[base.min(bytes.len())..];
    if cache.len() < HEADER_LEN || !cache.starts_with(MAGIC_NEW) {
        bail!("ld.so.cache: not a glibc-ld.so.cache1.1 file");
    }
    let nlibs = read_u32(cache, 20)? as usize;
    if nlibs > MAX_ENTRIES || HEADER_LEN + nlibs * ENTRY_LEN > cache.len() {
        bail!(
            "ld.so.cache: {nlibs} entries do not fit in {} bytes",
            cache.len()
        );
    }
    let mut entries = Vec::with_capacity(nlibs);
    let mut decoded = 0usize;
    for i in 0..nlibs {
        let at = HEADER_LEN + i * ENTRY_LEN;
        let flags = read_u32(cache, at)? as i32;
        let key = read_u32(cache, at + 4)? as usize;
        let value = read_u32(cache, at + 8)? as usize;
        let hwcap = read_u64(cache, at + 16)?;
        let entry = Entry {
            name: read_str(cache, key)?,
            path: read_str(cache, value)?,
            flags,
            hwcap,
        };
        decoded += entry.name.len() + entry.path.len();
        if decoded > MAX_DECODED_BYTES {
            bail!(
                "ld.so.cache: its entries name more than {} MiB of text: no real cache does",
                MAX_DECODED_BYTES >> 20
            );
        }
        entries.push(entry);
    }
    Ok(entries)
}

fn read_u32(b: &[u8], at: usize) -> Result<u32> {
    match b.get(at..at + 4) {
        Some(s) => Ok(u32::from_le_bytes(s.try_into().expect("4 bytes"))),
        None => bail!("ld.so.cache: truncated at byte {at}"),
    }
}

fn read_u64(b: &[u8], at: usize) -> Result<u64> {
    match b.get(at..at + 8) {
        Some(s) => Ok(u64::from_le_bytes(s.try_into().expect("8 bytes"))),
        None => bail!("ld.so.cache: truncated at byte {at}"),
    }
}

fn read_str(b: &[u8], at: usize) -> Result<String> {
    let Some(rest) = b.get(at..) else {
        bail!("ld.so.cache: string offset {at} is past the end");
    };
    let Some(len) = rest.iter().take(4096).position(|&c| c == 0) else {
        bail!("ld.so.cache: string at {at} is not terminated");
    };
    match std::str::from_utf8(&rest[..len]) {
        Ok(s) => Ok(s.to_owned()),
        Err(_) => bail!("ld.so.cache: string at {at} is not UTF-8"),
    }
}

/// glibc's `_dl_cache_libcmp`: like strcmp, but runs of digits compare as
/// numbers, so `libfoo.so.10` sorts after `libfoo.so.9`.
pub fn libcmp(a: &str, b: &str) -> Ordering {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let (mut i, mut j) = (0, 0);
    while i < a.len() {
        let (ca, cb) = (a[i], b.get(j).copied().unwrap_or(0));
        if ca.is_ascii_digit() {
            if !cb.is_ascii_digit() {
                return Ordering::Greater;
            }
            let (mut va, mut vb) = (0u64, 0u64);
            while i < a.len() && a[i].is_ascii_digit() {
                va = va.saturating_mul(10).saturating_add((a[i] - b'0') as u64);
                i += 1;
            }
            while j < b.len() && b[j].is_ascii_digit() {
                vb = vb.saturating_mul(10).saturating_add((b[j] - b'0') as u64);
                j += 1;
            }
            if va != vb {
                return va.cmp(&vb);
            }
        } else if cb.is_ascii_digit() {
            return Ordering::Less;
        } else if ca != cb {
            return ca.cmp(&cb);
        } else {
            i += 1;
            j += 1;
        }
    }
    0u8.cmp(&b.get(j).copied().unwrap_or(0))
}

/// Writes a new-format cache. Entries are sorted as ldconfig sorts them
/// (descending by `libcmp`, then flags, then hwcap), which is the order
/// glibc's binary search expects; exact duplicates are dropped.
pub fn write(entries: &[Entry]) -> Vec<u8> {
    let mut sorted: Vec<&Entry> = entries.iter().collect();
    sorted.sort_by(|x, y| {
        libcmp(&y.name, &x.name)
            .then(y.flags.cmp(&x.flags))
            .then(y.hwcap.cmp(&x.hwcap))
            .then(x.path.cmp(&y.path))
    });
    sorted.dedup_by(|x, y| x.name == y.name && x.flags == y.flags && x.hwcap == y.hwcap);

    let strings_at = HEADER_LEN + sorted.len() * ENTRY_LEN;
    let mut strings: Vec<u8> = Vec::new();
    let mut table = Vec::with_capacity(sorted.len() * ENTRY_LEN);
    for e in &sorted {
        let key = strings_at + strings.len();
        strings.extend_from_slice(e.name.as_bytes());
        strings.push(0);
        let value = strings_at + strings.len();
        strings.extend_from_slice(e.path.as_bytes());
        strings.push(0);
        table.extend_from_slice(&e.flags.to_le_bytes());
        table.extend_from_slice(&(key as u32).to_le_bytes());
        table.extend_from_slice(&(value as u32).to_le_bytes());
        table.extend_from_slice(&0u32.to_le_bytes()); // osversion, unused
        table.extend_from_slice(&e.hwcap.to_le_bytes());
    }
    let mut out = Vec::with_capacity(strings_at + strings.len());
    out.extend_from_slice(MAGIC_NEW);
    out.extend_from_slice(&(sorted.len() as u32).to_le_bytes());
    out.extend_from_slice(&(strings.len() as u32).to_le_bytes());
    out.push(ENDIAN_LITTLE);
    out.extend_from_slice(&[0; 3]);
    out.extend_from_slice(&0u32.to_le_bytes()); // no extension section
    out.extend_from_slice(&[0; 12]);
    out.extend_from_slice(&table);
    out.extend_from_slice(&strings);
    out
}

/// The image's entries with `added` on top: an added name replaces the
/// image's entries of the same name and flags.
pub fn merge(image: Vec<Entry>, added: &[Entry]) -> Vec<Entry> {
    let mut out: Vec<Entry> = image
        .into_iter()
        .filter(|e| !added.iter().any(|a| a.name == e.name && a.flags == e.flags))
        .collect();
    out.extend_from_slice(added);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(name: &str, path: &str) -> Entry {
        Entry {
            name: name.into(),
            path: path.into(),
            flags: crate::formats::platform::X86_64.cache_flags,
            hwcap: 0,
        }
    }

    #[test]
    fn round_trip() {
        let entries = vec![
            entry("libcuda.so.1", "/usr/lib/x86_64-linux-gnu/libcuda.so.1"),
            entry("libc.so.6", "/lib/x86_64-linux-gnu/libc.so.6"),
            entry(
                "libnvidia-ml.so.1",
                "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1",
            ),
        ];
        let bytes = write(&entries);
        let back = parse(&bytes).unwrap();
        assert_eq!(back.len(), 3);
        for e in &entries {
            assert!(back.contains(e));
        }
        // Sorted descending by libcmp.
        let names: Vec<&str> = back.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names, ["libnvidia-ml.so.1", "libcuda.so.1", "libc.so.6"]);
    }

    #[test]
    fn libcmp_compares_digit_runs_as_numbers() {
        assert_eq!(libcmp("libfoo.so.10", "libfoo.so.9"), Ordering::Greater);
        assert_eq!(libcmp("libfoo.so.1", "libfoo.so.1"), Ordering::Equal);
        assert_eq!(libcmp("liba.so", "libb.so"), Ordering::Less);
        assert_eq!(libcmp("libfoo.so", "libfoo.so.1"), Ordering::Less);
    }

    #[test]
    fn the_hosts_own_cache_parses() {
        if let Ok(bytes) = std::fs::read("/etc/ld.so.cache") {
            let entries = parse(&bytes).unwrap();
            assert!(entries.iter().any(|e| e.name == "libc.so.6"));
        }
    }

    #[test]
    fn shared_strings_cannot_blow_up_the_output() {
        // 30,000 entries sharing one 4 KiB name: a 724 KB file that would
        // decode to 246 MB.
        let n = 30_000usize;
        let string_at = HEADER_LEN + n * ENTRY_LEN;
        let mut bytes = vec![0u8; string_at + 4096];
        bytes[..MAGIC_NEW.len()].copy_from_slice(MAGIC_NEW);
        bytes[20..24].copy_from_slice(&(n as u32).to_le_bytes());
        for i in 0..n {
            let at = HEADER_LEN + i * ENTRY_LEN;
            bytes[at..at + 4]
                .copy_from_slice(&crate::formats::platform::X86_64.cache_flags.to_le_bytes());
            bytes[at + 4..at + 8].copy_from_slice(&(string_at as u32).to_le_bytes());
            bytes[at + 8..at + 12].copy_from_slice(&(string_at as u32).to_le_bytes());
        }
        for b in &mut bytes[string_at..string_at + 4095] {
            *b = b'a';
        }
        let err = parse(&bytes).unwrap_err();
        assert!(err.to_string().contains("MiB of text"), "{err}");
    }

    #[test]
    fn hostile_caches_are_errors_not_panics() {
        let good = write(&[entry("libx.so.1", "/x")]);
        let mut huge_count = good.clone();
        huge_count[20..24].copy_from_slice(&u32::MAX.to_le_bytes());
        let mut bad_offset = good.clone();
        bad_offset[HEADER_LEN + 4..HEADER_LEN + 8].copy_from_slice(&9_999_999u32.to_le_bytes());
        let mut unterminated = good.clone();
        let last = unterminated.len() - 1;
        unterminated[last] = b'x';
        for bad in [
            &b""[..],
            &b"garbage garbage garbage garbage garbage garbage garbage"[..],
            &good[..30],
            &huge_count,
            &bad_offset,
            &unterminated,
            &b"ld.so-1.7.0\xff\xff\xff\xff"[..],
        ] {
            assert!(parse(bad).is_err());
        }
    }

    #[test]
    fn merge_replaces_same_names() {
        let image = vec![entry("libcuda.so.1", "/old"), entry("libc.so.6", "/libc")];
        let merged = merge(image, &[entry("libcuda.so.1", "/new")]);
        assert_eq!(merged.len(), 2);
        assert!(merged.iter().any(|e| e.path == "/new"));
        assert!(!merged.iter().any(|e| e.path == "/old"));
    }
}

#[cfg(test)]
mod glibc_agrees {
    use super::*;

    /// The host's ldconfig lists exactly what we wrote.
    #[test]
    fn ldconfig_reads_our_cache() {
        let ldconfig = ["/sbin/ldconfig", "/usr/sbin/ldconfig"]
            .into_iter()
            .find(|p| std::path::Path::new(p).exists());
        let Some(ldconfig) = ldconfig else { return };
        let dir = std::env::temp_dir().join(format!("ldcache-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("ld.so.cache");
        // Both platforms' flags: glibc's own labels say which is which.
        let platforms = [
            crate::formats::platform::X86_64,
            crate::formats::platform::AARCH64,
        ];
        let entries: Vec<Entry> = (1..=12)
            .map(|i| Entry {
                name: format!("libgpurun{i}.so.1"),
                path: format!("/opt/lib/libgpurun{i}.so.1"),
                flags: platforms[i % 2].cache_flags,
                hwcap: 0,
            })
            .collect();
        std::fs::write(&file, write(&entries)).unwrap();
        let out = std::process::Command::new(ldconfig)
            .arg("-C")
            .arg(&file)
            .arg("-p")
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.starts_with("12 libs found in cache"), "{text}");
        for (i, e) in entries.iter().enumerate() {
            let label = platforms[(i + 1) % 2].cache_label;
            assert!(
                text.contains(&format!("{} ({label}) => {}", e.name, e.path)),
                "{text}"
            );
        }
        let _ = std::fs::remove_dir_all(dir);
    }
}
