//! gpurun patch: runc's -ENOSYS stub. A syscall newer than every one the
//! profile names gets ENOSYS, not the profile's default action: libc falls
//! back to an older syscall only on ENOSYS (clone3 to clone, faccessat2 to
//! faccessat), and a profile written before a syscall existed cannot name
//! it. Like runc (libcontainer/seccomp/patchbpf), the stub is put in front
//! of libseccomp's program and the whole is loaded with seccomp(2); it is
//! left out when the default action lets syscalls through anyway (allow,
//! log, trace).

use std::io;

/// One classic BPF instruction (`struct sock_filter`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Insn {
    pub code: u16,
    pub jt: u8,
    pub jf: u8,
    pub k: u32,
}

const LD_W_ABS: u16 = 0x20; // BPF_LD | BPF_W | BPF_ABS
const JEQ_K: u16 = 0x15; // BPF_JMP | BPF_JEQ | BPF_K
const JGT_K: u16 = 0x25; // BPF_JMP | BPF_JGT | BPF_K
const JSET_K: u16 = 0x45; // BPF_JMP | BPF_JSET | BPF_K
const JA: u16 = 0x05; // BPF_JMP | BPF_JA
const RET_K: u16 = 0x06; // BPF_RET | BPF_K
const SECCOMP_RET_ERRNO: u32 = 0x0005_0000;
/// Offsets in `struct seccomp_data`.
const NR_OFFSET: u32 = 0;
const ARCH_OFFSET: u32 = 4;
/// x32 syscalls are x86_64 ones with this bit set; libseccomp's own
/// program judges them.
const X32_SYSCALL_BIT: u32 = 0x4000_0000;

pub const AUDIT_ARCH_X86_64: u32 = 0xC000_003E;
pub const AUDIT_ARCH_I386: u32 = 0x4000_0003;
pub const AUDIT_ARCH_AARCH64: u32 = 0xC000_00B7;
pub const AUDIT_ARCH_ARM: u32 = 0x4000_0028;
pub const AUDIT_ARCH_PPC64LE: u32 = 0xC000_0015;
pub const AUDIT_ARCH_S390X: u32 = 0x8000_0016;
pub const AUDIT_ARCH_RISCV64: u32 = 0xC000_00F3;

/// The stub for `limits`, each (audit arch, highest syscall number the
/// profile names for it), to run before a program of any length: a
/// matching arch with a higher number returns ENOSYS, everything else
/// falls through to the instruction after the stub.
pub fn stub(limits: &[(u32, u32)]) -> Vec<Insn> {
    if limits.is_empty() {
        return Vec::new();
    }
    // Labels are resolved once the layout is known: each arch's section
    // is jeq (+ ld nr, [jset x32], jgt); then `ja filter`, `ret ENOSYS`.
    let section_len = |arch: u32| if arch == AUDIT_ARCH_X86_64 { 4 } else { 3 };
    let total: usize = 1 + limits.iter().map(|&(a, _)| section_len(a)).sum::<usize>() + 2;
    let ja_filter = total - 2;
    let ret_enosys = total - 1;
    let rel =
        |from: usize, to: usize| -> u8 { u8::try_from(to - from - 1).expect("the stub is short") };
    let mut out = vec![Insn {
        code: LD_W_ABS,
        jt: 0,
        jf: 0,
        k: ARCH_OFFSET,
    }];
    for &(arch, max) in limits {
        let at = out.len();
        let next = at + section_len(arch);
        out.push(Insn {
            code: JEQ_K,
            jt: 0,
            jf: rel(at, next),
            k: arch,
        });
        out.push(Insn {
            code: LD_W_ABS,
            jt: 0,
            jf: 0,
            k: NR_OFFSET,
        });
        if arch == AUDIT_ARCH_X86_64 {
            let pc = out.len();
            out.push(Insn {
                code: JSET_K,
                jt: rel(pc, ja_filter),
                jf: 0,
                k: X32_SYSCALL_BIT,
            });
        }
        let pc = out.len();
        out.push(Insn {
            code: JGT_K,
            jt: rel(pc, ret_enosys),
            jf: rel(pc, ja_filter),
            k: max,
        });
    }
    out.push(Insn {
        code: JA,
        jt: 0,
        jf: 0,
        k: 1, // over `ret ENOSYS`, to the program
    });
    out.push(Insn {
        code: RET_K,
        jt: 0,
        jf: 0,
        k: SECCOMP_RET_ERRNO | libc::ENOSYS as u32,
    });
    debug_assert_eq!(out.len(), total);
    out
}

/// libseccomp's exported program (`struct sock_filter`s in native order).
pub fn parse(bytes: &[u8]) -> Vec<Insn> {
    bytes
        .chunks_exact(8)
        .map(|c| Insn {
            code: u16::from_ne_bytes([c[0], c[1]]),
            jt: c[2],
            jf: c[3],
            k: u32::from_ne_bytes([c[4], c[5], c[6], c[7]]),
        })
        .collect()
}

/// Loads `program` with seccomp(2) and `flags` (SECCOMP_FILTER_FLAG_*);
/// returns the listener's descriptor when `flags` asks for one.
pub fn load(program: &[Insn], flags: libc::c_ulong) -> io::Result<Option<i32>> {
    let filters: Vec<libc::sock_filter> = program
        .iter()
        .map(|i| libc::sock_filter {
            code: i.code,
            jt: i.jt,
            jf: i.jf,
            k: i.k,
        })
        .collect();
    let prog = libc::sock_fprog {
        len: u16::try_from(filters.len()).map_err(|_| io::Error::from_raw_os_error(libc::E2BIG))?,
        filter: filters.as_ptr() as *mut libc::sock_filter,
    };
    // SAFETY: prog points at `filters`, alive across the call.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            flags,
            &prog as *const libc::sock_fprog,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((flags & libc::SECCOMP_FILTER_FLAG_NEW_LISTENER as libc::c_ulong != 0).then_some(rc as i32))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `program` over (arch, nr) as the kernel would, for the few
    /// instructions the stub uses; `None` where it falls off the end
    /// (into the program behind it).
    fn run(program: &[Insn], arch: u32, nr: u32) -> Option<u32> {
        let mut pc = 0;
        let mut acc = 0u32;
        while pc < program.len() {
            let i = program[pc];
            pc += 1;
            match i.code {
                LD_W_ABS => acc = if i.k == ARCH_OFFSET { arch } else { nr },
                JEQ_K => pc += usize::from(if acc == i.k { i.jt } else { i.jf }),
                JGT_K => pc += usize::from(if acc > i.k { i.jt } else { i.jf }),
                JSET_K => pc += usize::from(if acc & i.k != 0 { i.jt } else { i.jf }),
                JA => pc += i.k as usize,
                RET_K => return Some(i.k),
                other => panic!("unexpected opcode {other:#x}"),
            }
        }
        None
    }

    const ENOSYS: Option<u32> = Some(SECCOMP_RET_ERRNO | libc::ENOSYS as u32);

    #[test]
    fn newer_syscalls_get_enosys_known_ones_reach_the_program() {
        let stub = stub(&[(AUDIT_ARCH_X86_64, 435), (AUDIT_ARCH_I386, 440)]);
        assert_eq!(run(&stub, AUDIT_ARCH_X86_64, 1000), ENOSYS);
        assert_eq!(run(&stub, AUDIT_ARCH_X86_64, 436), ENOSYS);
        assert_eq!(run(&stub, AUDIT_ARCH_X86_64, 435), None);
        assert_eq!(run(&stub, AUDIT_ARCH_X86_64, 0), None);
        // x32 numbers are left to libseccomp's program.
        assert_eq!(run(&stub, AUDIT_ARCH_X86_64, X32_SYSCALL_BIT | 1000), None);
        assert_eq!(run(&stub, AUDIT_ARCH_I386, 440), None);
        assert_eq!(run(&stub, AUDIT_ARCH_I386, 441), ENOSYS);
        // An arch the profile does not cover: the program decides.
        assert_eq!(run(&stub, AUDIT_ARCH_AARCH64, 5000), None);
    }

    #[test]
    fn no_limits_no_stub() {
        assert!(stub(&[]).is_empty());
    }

    #[test]
    fn exported_programs_parse_in_native_order() {
        let insn = Insn {
            code: RET_K,
            jt: 1,
            jf: 2,
            k: 0x7fff_0000,
        };
        let mut bytes = insn.code.to_ne_bytes().to_vec();
        bytes.extend([insn.jt, insn.jf]);
        bytes.extend(insn.k.to_ne_bytes());
        assert_eq!(parse(&bytes), [insn]);
    }
}
