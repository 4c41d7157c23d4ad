//! The Singularity Image Format (Apptainer's `.sif`), as far as running
//! one needs: where its system partition (a squashfs) lies in the file.
//! Pure: the caller reads the bytes.
//!
//! The layout is Go's `encoding/binary` of sylabs/sif's structures, packed
//! and little-endian: a 128-byte global header, then at its descriptor
//! offset a table of fixed-size descriptors.

use anyhow::{bail, Result};

/// Bytes of the global header.
pub const HEADER_LEN: usize = 128;
/// Bytes of one descriptor.
pub const DESCRIPTOR_LEN: usize = 585;
/// The most descriptors read (sif makes 48 by default).
pub const MAX_DESCRIPTORS: u64 = 1024;

const MAGIC: &[u8] = b"SIF_MAGIC";
const DATA_PARTITION: i32 = 0x4004;
const FS_SQUASHFS: i32 = 1;
const FS_ENCRYPTED_SQUASHFS: i32 = 5;
const PART_SYSTEM: i32 = 1;
const PART_PRIMARY_SYSTEM: i32 = 2;

/// Where the descriptors are, from the global header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub descriptors: u64,
    pub offset: u64,
}

/// A partition's place in the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Partition {
    pub offset: u64,
    pub size: u64,
}

/// Whether `start` (the file's first bytes) is a SIF file's.
pub fn is_sif(start: &[u8]) -> bool {
    start.get(32..32 + MAGIC.len()) == Some(MAGIC)
}

fn i32_at(b: &[u8], at: usize) -> i32 {
    i32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}

fn i64_at(b: &[u8], at: usize) -> i64 {
    i64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

/// The descriptor table's size and offset, from the global header.
pub fn header(bytes: &[u8]) -> Result<Header> {
    if bytes.len() < HEADER_LEN || !is_sif(bytes) {
        bail!("not a SIF file (no SIF_MAGIC header)");
    }
    let (total, offset) = (i64_at(bytes, 88), i64_at(bytes, 96));
    if !(0..=MAX_DESCRIPTORS as i64).contains(&total) || offset < HEADER_LEN as i64 {
        bail!("a SIF header with {total} descriptors at {offset}: damaged");
    }
    Ok(Header {
        descriptors: total as u64,
        offset: offset as u64,
    })
}

/// The system partition in `table` (the header's descriptors): the
/// primary one, else the first; a squashfs. An encrypted one, or another
/// file system, is refused with why.
pub fn system_partition(table: &[u8], file_len: u64) -> Result<Partition> {
    let mut found: Option<(i32, i32, Partition)> = None;
    for d in table.chunks_exact(DESCRIPTOR_LEN) {
        let used = d[4] != 0;
        if !used || i32_at(d, 0) != DATA_PARTITION {
            continue;
        }
        let (fstype, parttype) = (i32_at(d, 201), i32_at(d, 205));
        if parttype != PART_SYSTEM && parttype != PART_PRIMARY_SYSTEM {
            continue;
        }
        let (offset, size) = (i64_at(d, 17), i64_at(d, 25));
        if offset < 0 || size <= 0 || (offset as u64).saturating_add(size as u64) > file_len {
            bail!("a SIF partition at {offset} of {size} bytes, past the file's end: damaged");
        }
        let part = Partition {
            offset: offset as u64,
            size: size as u64,
        };
        let primary = parttype == PART_PRIMARY_SYSTEM;
        if found.is_none() || primary {
            found = Some((fstype, parttype, part));
        }
        if primary {
            break;
        }
    }
    let Some((fstype, _, part)) = found else {
        bail!("a SIF file with no system partition");
    };
    match fstype {
        FS_SQUASHFS => Ok(part),
        FS_ENCRYPTED_SQUASHFS => {
            bail!("an encrypted SIF file: gpurun does not decrypt images; run it with Apptainer")
        }
        other => bail!("a SIF system partition of file system type {other}, not squashfs"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header_bytes(total: i64, offset: i64) -> Vec<u8> {
        let mut h = vec![0u8; HEADER_LEN];
        h[..32].copy_from_slice(b"#!/usr/bin/env run-singularity\n\0");
        h[32..41].copy_from_slice(MAGIC);
        h[88..96].copy_from_slice(&total.to_le_bytes());
        h[96..104].copy_from_slice(&offset.to_le_bytes());
        h
    }

    fn descriptor(datatype: i32, fstype: i32, parttype: i32, offset: i64, size: i64) -> Vec<u8> {
        let mut d = vec![0u8; DESCRIPTOR_LEN];
        d[..4].copy_from_slice(&datatype.to_le_bytes());
        d[4] = 1;
        d[17..25].copy_from_slice(&offset.to_le_bytes());
        d[25..33].copy_from_slice(&size.to_le_bytes());
        d[201..205].copy_from_slice(&fstype.to_le_bytes());
        d[205..209].copy_from_slice(&parttype.to_le_bytes());
        d
    }

    #[test]
    fn the_header_says_where_the_descriptors_are() {
        assert_eq!(
            header(&header_bytes(48, 4096)).unwrap(),
            Header {
                descriptors: 48,
                offset: 4096
            }
        );
        assert!(header(&header_bytes(1 << 40, 4096)).is_err());
        assert!(header(&[0u8; HEADER_LEN]).is_err());
        assert!(header(b"short").is_err());
    }

    #[test]
    fn the_primary_system_partition_wins_and_others_are_passed_over() {
        let table = [
            descriptor(0x4001, 0, 0, 5000, 10), // a definition file
            descriptor(DATA_PARTITION, FS_SQUASHFS, 3, 6000, 100), // data
            descriptor(DATA_PARTITION, FS_SQUASHFS, PART_SYSTEM, 7000, 100),
            descriptor(DATA_PARTITION, FS_SQUASHFS, PART_PRIMARY_SYSTEM, 8192, 4096),
        ]
        .concat();
        assert_eq!(
            system_partition(&table, 1 << 20).unwrap(),
            Partition {
                offset: 8192,
                size: 4096
            }
        );
    }

    #[test]
    fn encrypted_foreign_missing_and_overlong_partitions_are_refused() {
        let one = |d: Vec<u8>| system_partition(&d, 1 << 20).unwrap_err().to_string();
        let encrypted = descriptor(
            DATA_PARTITION,
            FS_ENCRYPTED_SQUASHFS,
            PART_PRIMARY_SYSTEM,
            4096,
            10,
        );
        assert!(one(encrypted).contains("encrypted"));
        let ext3 = descriptor(DATA_PARTITION, 2, PART_PRIMARY_SYSTEM, 4096, 10);
        assert!(one(ext3).contains("not squashfs"));
        assert!(one(descriptor(0x4001, 0, 0, 4096, 10)).contains("no system partition"));
        let past_end = descriptor(
            DATA_PARTITION,
            FS_SQUASHFS,
            PART_PRIMARY_SYSTEM,
            1 << 20,
            10,
        );
        assert!(one(past_end).contains("past the file's end"));
        let mut unused = descriptor(DATA_PARTITION, FS_SQUASHFS, PART_PRIMARY_SYSTEM, 4096, 10);
        unused[4] = 0;
        assert!(one(unused).contains("no system partition"));
    }
}
