//! Reading a shared library's SONAME from its ELF dynamic section, and a
//! named section (the CUDA compat library's note). Files may come from an
//! image: every offset and size is checked, nothing large is read. Only a
//! file of the platform's own machine (`e_machine`) is read: another
//! architecture's library is no library here.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

use crate::formats::platform::Platform;

const DT_NULL: u64 = 0;
const DT_STRTAB: u64 = 5;
const DT_SONAME: u64 = 14;
const PT_LOAD: u32 = 1;
const PT_DYNAMIC: u32 = 2;

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(at..at + 2)?.try_into().ok()?))
}
fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}
fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

fn read_at(file: &mut File, offset: u64, len: usize) -> Option<Vec<u8>> {
    if len > 1 << 20 {
        return None;
    }
    file.seek(SeekFrom::Start(offset)).ok()?;
    let mut buf = vec![0; len];
    file.read_exact(&mut buf).ok()?;
    Some(buf)
}

/// The SONAME of a 64-bit little-endian ELF file of `platform`'s machine,
/// if it has one.
pub fn soname(path: &Path, platform: &Platform) -> Option<String> {
    soname_of(&mut File::open(path).ok()?, platform)
}

/// The `e_machine` of a little-endian ELF file of either class (32 or
/// 64-bit), from its first 20 bytes or more.
pub fn header_machine(header: &[u8]) -> Option<u16> {
    (header.get(..4)? == b"\x7fELF" && *header.get(5)? == 1).then(|| u16_at(header, 18))?
}

/// The `e_machine` of an ELF file of either class.
pub fn machine(file: &mut File) -> Option<u16> {
    header_machine(&read_at(file, 0, 20)?)
}

/// Whether `file` is not an ELF file of another machine than
/// `platform`'s (a file that is no ELF at all is left to its reader).
pub fn is_machine(file: &mut File, platform: &Platform) -> bool {
    machine(file).is_none_or(|m| platform.is_native_machine(m))
}

/// The 64-byte header of a 64-bit little-endian ELF file of `platform`'s
/// machine.
fn elf64_le_header(file: &mut File, platform: &Platform) -> Option<Vec<u8>> {
    let header = read_at(file, 0, 64)?;
    let native = header_machine(&header).is_some_and(|m| platform.is_native_machine(m));
    (native && header[4] == 2).then_some(header)
}

/// The SONAME of an open 64-bit little-endian ELF file of `platform`'s
/// machine, if it has one.
pub fn soname_of(file: &mut File, platform: &Platform) -> Option<String> {
    let file = &mut *file;
    let header = elf64_le_header(file, platform)?;
    let phoff = u64_at(&header, 32)?;
    let phentsize = u16_at(&header, 54)? as usize;
    let phnum = u16_at(&header, 56)? as usize;
    if phentsize < 56 || phnum > 256 {
        return None;
    }
    let phdrs = read_at(file, phoff, phentsize * phnum)?;
    let mut loads = Vec::new();
    let mut dynamic = None;
    for i in 0..phnum {
        let p = &phdrs[i * phentsize..];
        let kind = u32_at(p, 0)?;
        let (offset, vaddr, filesz) = (u64_at(p, 8)?, u64_at(p, 16)?, u64_at(p, 32)?);
        match kind {
            PT_LOAD => loads.push((vaddr, offset, filesz)),
            PT_DYNAMIC => dynamic = Some((offset, filesz)),
            _ => {}
        }
    }
    let (dyn_off, dyn_size) = dynamic?;
    let dynamic = read_at(file, dyn_off, dyn_size.min(64 * 1024) as usize)?;
    let (mut strtab, mut soname) = (None, None);
    for entry in dynamic.chunks_exact(16) {
        let (tag, value) = (u64_at(entry, 0)?, u64_at(entry, 8)?);
        match tag {
            DT_NULL => break,
            DT_STRTAB => strtab = Some(value),
            DT_SONAME => soname = Some(value),
            _ => {}
        }
    }
    // DT_STRTAB is a virtual address: map it to a file offset.
    let strtab = strtab?;
    let (vaddr, offset, _) = loads
        .iter()
        .find(|(v, _, size)| strtab >= *v && strtab < v + size)?;
    let at = offset + (strtab - vaddr) + soname?;
    let bytes = read_at(file, at, 256).or_else(|| read_at(file, at, 64))?;
    let len = bytes.iter().position(|&b| b == 0)?;
    String::from_utf8(bytes[..len].to_vec()).ok()
}

const SHT_NOTE: u32 = 7;

/// A note section of a 64-bit little-endian ELF file of `platform`'s
/// machine: its bytes (at most 64 KiB) and alignment.
pub fn note_section(file: &mut File, name: &str, platform: &Platform) -> Option<(Vec<u8>, u64)> {
    let header = elf64_le_header(file, platform)?;
    let shoff = u64_at(&header, 0x28)?;
    let shentsize = u16_at(&header, 0x3a)? as usize;
    let shnum = u16_at(&header, 0x3c)? as usize;
    let shstrndx = u16_at(&header, 0x3e)? as usize;
    if shentsize < 64 || shnum > 4096 || shstrndx >= shnum {
        return None;
    }
    let shdrs = read_at(file, shoff, shentsize * shnum)?;
    let section = |i: usize| -> Option<(u32, u32, u64, u64, u64)> {
        let h = shdrs.get(i * shentsize..(i + 1) * shentsize)?;
        Some((
            u32_at(h, 0)?,
            u32_at(h, 4)?,
            u64_at(h, 0x18)?,
            u64_at(h, 0x20)?,
            u64_at(h, 0x30)?,
        ))
    };
    let (_, _, str_off, str_size, _) = section(shstrndx)?;
    let names = read_at(file, str_off, str_size.min(1 << 16) as usize)?;
    for i in 0..shnum {
        let (name_at, kind, offset, size, align) = section(i)?;
        let tail = names.get(name_at as usize..)?;
        let end = tail.iter().position(|&b| b == 0)?;
        if kind == SHT_NOTE && &tail[..end] == name.as_bytes() {
            if size > 1 << 16 {
                return None;
            }
            return Some((read_at(file, offset, size as usize)?, align));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_sonames_of_host_libraries() {
        let native = Platform::native();
        let dir = format!("/lib/{}", native.triplet);
        for (name, want) in [
            ("libc.so.6", "libc.so.6"),
            ("libseccomp.so.2", "libseccomp.so.2"),
        ] {
            let path = Path::new(&dir).join(name);
            if path.exists() {
                assert_eq!(soname(&path, native).as_deref(), Some(want));
            }
        }
        assert_eq!(soname(Path::new("/etc/passwd"), native), None);
        assert_eq!(soname(Path::new("/nonexistent"), native), None);
    }

    /// The host's own libc is no library for the other platform.
    #[test]
    fn another_machines_library_is_not_read() {
        let native = Platform::native();
        let other = if native == &crate::formats::platform::X86_64 {
            &crate::formats::platform::AARCH64
        } else {
            &crate::formats::platform::X86_64
        };
        let libc = Path::new("/lib").join(native.triplet).join("libc.so.6");
        let mut file = File::open(&libc).unwrap();
        assert_eq!(machine(&mut file), Some(native.elf_machine));
        assert!(is_machine(&mut file, native));
        assert!(!is_machine(&mut file, other));
        assert_eq!(soname(&libc, other), None);
        let mut text = File::open("/etc/passwd").unwrap();
        assert_eq!(machine(&mut text), None);
        assert!(is_machine(&mut text, other), "no ELF: left to its reader");
    }
}
