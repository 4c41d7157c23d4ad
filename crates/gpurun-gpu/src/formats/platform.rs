//! The one place that knows the CPU architecture: the multiarch directory,
//! the linker cache's flags, the loader's name, the ELF machine, the
//! Vulkan ICD's file name, and whether 32-bit compat libraries exist.
//! Everything else asks a [`Platform`]; [`Platform::native`] is the one
//! gpurun was built for, which is the host's (a binary runs only there).

use serde::Serialize;

/// glibc's `FLAG_ELF_LIBC6`: the low byte of a cache entry's flags.
const FLAG_ELF_LIBC6: i32 = 0x0003;
/// glibc's `FLAG_TYPE_MASK` and `FLAG_REQUIRED_MASK`.
const FLAG_TYPE_MASK: i32 = 0x00ff;
const FLAG_REQUIRED_MASK: i32 = 0xff00;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Platform {
    /// The kernel's and Rust's name: `uname -m`.
    pub arch: &'static str,
    /// Debian's multiarch triplet: `/usr/lib/<triplet>`.
    pub triplet: &'static str,
    /// A native library's flags in `ld.so.cache` (glibc's
    /// `FLAG_ELF_LIBC6` with the architecture's required bits).
    pub cache_flags: i32,
    /// What `ldconfig -p` prints for such an entry.
    pub cache_label: &'static str,
    /// The dynamic loader's file name.
    pub loader: &'static str,
    /// Where programs ask for the loader (their `PT_INTERP`).
    pub loader_path: &'static str,
    /// The ELF header's `e_machine` of a native file.
    pub elf_machine: u16,
    /// The architecture's own Vulkan ICD file, beside `nvidia_icd.json`.
    pub vulkan_icd: &'static str,
    /// The 32-bit compat libraries' triplet, where the architecture has
    /// them (x86_64's i386; aarch64 has none).
    pub compat32_triplet: Option<&'static str>,
}

pub const X86_64: Platform = Platform {
    arch: "x86_64",
    triplet: "x86_64-linux-gnu",
    cache_flags: 0x0303,
    cache_label: "libc6,x86-64",
    loader: "ld-linux-x86-64.so.2",
    loader_path: "/lib64/ld-linux-x86-64.so.2",
    elf_machine: 62,
    vulkan_icd: "nvidia_icd.x86_64.json",
    compat32_triplet: Some("i386-linux-gnu"),
};

pub const AARCH64: Platform = Platform {
    arch: "aarch64",
    triplet: "aarch64-linux-gnu",
    cache_flags: 0x0a03,
    cache_label: "libc6,AArch64",
    loader: "ld-linux-aarch64.so.1",
    loader_path: "/lib/ld-linux-aarch64.so.1",
    elf_machine: 183,
    vulkan_icd: "nvidia_icd.aarch64.json",
    compat32_triplet: None,
};

/// Which kind of library a linker-cache entry names, for a platform.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheWidth {
    Native,
    Compat32,
    /// Another architecture's, or not glibc's: never used.
    Foreign,
}

impl Platform {
    /// The platform this binary was built for.
    pub const fn native() -> &'static Platform {
        #[cfg(target_arch = "aarch64")]
        {
            &AARCH64
        }
        #[cfg(not(target_arch = "aarch64"))]
        {
            &X86_64
        }
    }

    /// By `uname -m`'s name (`arm64` too), for tests and tools that
    /// describe another host.
    pub fn by_arch(arch: &str) -> Option<&'static Platform> {
        match arch {
            "x86_64" | "amd64" => Some(&X86_64),
            "aarch64" | "arm64" => Some(&AARCH64),
            _ => None,
        }
    }

    /// A 32-bit compat library's flags in `ld.so.cache`.
    pub fn compat32_cache_flags(&self) -> Option<i32> {
        self.compat32_triplet.map(|_| FLAG_ELF_LIBC6)
    }

    /// Whether a cache entry of `flags` is this platform's native, its
    /// 32-bit compat, or neither.
    pub fn cache_width(&self, flags: i32) -> CacheWidth {
        if flags & FLAG_TYPE_MASK != FLAG_ELF_LIBC6 {
            return CacheWidth::Foreign;
        }
        match flags & FLAG_REQUIRED_MASK {
            r if r == self.cache_flags & FLAG_REQUIRED_MASK => CacheWidth::Native,
            0 if self.compat32_triplet.is_some() => CacheWidth::Compat32,
            _ => CacheWidth::Foreign,
        }
    }

    /// The host's usual 64-bit library directories, most specific first
    /// (after those its linker cache names).
    pub fn host_lib_dirs(&self) -> Vec<String> {
        let t = self.triplet;
        let mut dirs = vec![
            format!("/usr/lib/{t}/nvidia/current"),
            format!("/usr/lib/{t}"),
            format!("/lib/{t}"),
        ];
        dirs.extend(
            [
                "/usr/local/nvidia/lib64",
                "/usr/lib64",
                "/lib64",
                "/usr/lib",
                "/lib",
            ]
            .map(str::to_owned),
        );
        dirs
    }

    /// The host's usual 32-bit compat library directories (none where the
    /// architecture has no compat).
    pub fn host_lib32_dirs(&self) -> Vec<String> {
        let Some(t) = self.compat32_triplet else {
            return Vec::new();
        };
        vec![
            format!("/usr/lib/{t}/nvidia/current"),
            format!("/usr/lib/{t}"),
            "/usr/lib32".to_owned(),
            "/lib32".to_owned(),
        ]
    }

    /// An image's library directories, most specific first.
    pub fn image_lib_dirs(&self) -> Vec<String> {
        vec![
            format!("/usr/lib/{}", self.triplet),
            "/usr/lib64".to_owned(),
            "/lib64".to_owned(),
            "/usr/lib".to_owned(),
        ]
    }

    /// An image's 32-bit compat library directories.
    pub fn image_lib32_dirs(&self) -> Vec<String> {
        let Some(t) = self.compat32_triplet else {
            return Vec::new();
        };
        vec![
            format!("/usr/lib/{t}"),
            "/usr/lib32".to_owned(),
            "/lib32".to_owned(),
        ]
    }

    /// Whether an ELF header's `e_machine` is this platform's.
    pub fn is_native_machine(&self, e_machine: u16) -> bool {
        e_machine == self.elf_machine
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_widths_follow_glibcs_flags() {
        // x86_64: 0x0303 native, 0x0003 i386, aarch64's 0x0a03 foreign.
        assert_eq!(X86_64.cache_width(0x0303), CacheWidth::Native);
        assert_eq!(X86_64.cache_width(0x0003), CacheWidth::Compat32);
        assert_eq!(X86_64.cache_width(0x0a03), CacheWidth::Foreign);
        // aarch64: 0x0a03 native; no compat, so 0x0003 and 0x0303 are not.
        assert_eq!(AARCH64.cache_width(0x0a03), CacheWidth::Native);
        assert_eq!(AARCH64.cache_width(0x0003), CacheWidth::Foreign);
        assert_eq!(AARCH64.cache_width(0x0303), CacheWidth::Foreign);
        // libc5 or a.out entries (type byte not libc6) never count.
        assert_eq!(X86_64.cache_width(0x0302), CacheWidth::Foreign);
    }

    #[test]
    fn directories_name_the_architecture() {
        assert!(AARCH64
            .host_lib_dirs()
            .contains(&"/usr/lib/aarch64-linux-gnu".to_owned()));
        assert!(!AARCH64.host_lib_dirs().iter().any(|d| d.contains("x86_64")));
        assert!(AARCH64.host_lib32_dirs().is_empty());
        assert!(AARCH64.image_lib32_dirs().is_empty());
        assert_eq!(AARCH64.compat32_cache_flags(), None);
        assert_eq!(X86_64.image_lib_dirs()[0], "/usr/lib/x86_64-linux-gnu");
        assert_eq!(X86_64.compat32_cache_flags(), Some(0x0003));
    }

    #[test]
    fn native_is_the_build_target() {
        assert_eq!(Platform::native().arch, std::env::consts::ARCH);
        assert_eq!(Platform::by_arch("arm64"), Some(&AARCH64));
        assert_eq!(Platform::by_arch("riscv64"), None);
    }
}
