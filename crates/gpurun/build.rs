//! Records the git commit gpurun is built from, for `gpurun --version`,
//! links the binary position-dependent, and builds the exec stub
//! (`stub/exec-stub.c`, see src/runtime/protect/exec_stub.rs) that the binary
//! carries.

use std::process::Command;

fn main() {
    let commit = Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "unknown".to_owned());
    println!("cargo:rustc-env=GPURUN_COMMIT={commit}");
    // Every create, run and exec as root loads the binary twice (the
    // protected re-exec). As a PIE, each load relocates 370 KB of
    // .data.rel.ro (vtables, static tables), one copy-on-write fault per
    // page: a non-PIE link fixes those addresses at link time (-170 page
    // faults, about 5% of a root `run`, 0.3 MB of peak RSS). Debian links
    // runc the same way. Only this package's binaries: dependencies and
    // proc-macros keep their default.
    println!("cargo:rustc-link-arg-bins=-no-pie");
    build_exec_stub();
    for path in ["../../.git/HEAD", "../../.git/refs/heads"] {
        println!("cargo:rerun-if-changed={path}");
    }
}

/// The stub is freestanding code for x86_64 and aarch64: no libc, no
/// loader. Elsewhere it is not built, and every root `run` takes the
/// protected re-exec.
fn build_exec_stub() {
    println!("cargo::rustc-check-cfg=cfg(gpurun_exec_stub)");
    println!("cargo:rerun-if-changed=stub/exec-stub.c");
    let arch = std::env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    // The largest page any kernel of the architecture uses, so the stub
    // loads on each: aarch64 kernels run 4K, 16K or 64K pages (Grace hosts
    // 64K).
    let max_page = match (arch.as_str(), os.as_str()) {
        ("x86_64", "linux") => 4096,
        ("aarch64", "linux") => 65536,
        _ => return,
    };
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"))
        .join("exec-stub");
    let cc = stub_compiler(&arch);
    let status = Command::new(&cc)
        .args([
            "-Os",
            "-static",
            "-nostdlib",
            "-ffreestanding",
            "-fno-builtin",
            "-fno-stack-protector",
            "-fno-asynchronous-unwind-tables",
            "-fno-pie",
            "-no-pie",
            "-Wall",
            "-Werror",
            "-Wl,--build-id=none",
            "-Wl,-z,noexecstack",
            &format!("-Wl,-z,max-page-size={max_page}"),
            "-s",
            "-o",
        ])
        .arg(&out)
        .arg("stub/exec-stub.c")
        .status()
        .unwrap_or_else(|e| {
            panic!("run {cc} to build the exec stub: {e} (install gcc: scripts/install-deps.sh)")
        });
    assert!(status.success(), "{cc} failed to build stub/exec-stub.c");
    println!("cargo:rustc-cfg=gpurun_exec_stub");
}

/// The target's C compiler, as cc-rs picks it: `CC_<target>` or
/// `TARGET_CC`, else `CC` for a native build and `<arch>-linux-gnu-gcc`
/// for a cross build.
fn stub_compiler(arch: &str) -> String {
    let target = std::env::var("TARGET").unwrap_or_default();
    let host = std::env::var("HOST").unwrap_or_default();
    let per_target = format!("CC_{}", target.replace('-', "_"));
    for var in [&per_target, "TARGET_CC", "CC"] {
        println!("cargo:rerun-if-env-changed={var}");
    }
    let from_env = |var: &str| std::env::var(var).ok().filter(|v| !v.is_empty());
    from_env(&per_target)
        .or_else(|| from_env("TARGET_CC"))
        .or_else(|| (target == host).then(|| from_env("CC")).flatten())
        .unwrap_or_else(|| {
            if target == host {
                "cc".to_owned()
            } else {
                format!("{arch}-linux-gnu-gcc")
            }
        })
}
