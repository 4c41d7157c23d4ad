//! Whether we are root on the host, or only root inside a user namespace
//! (rootless Podman runs its runtime that way). Only the first may use
//! /run/gpurun and cgroups without delegation.

use std::sync::OnceLock;

/// Root in the initial user namespace: euid 0 and the identity uid map.
pub fn is_host_root() -> bool {
    nix::unistd::geteuid().is_root() && !in_user_namespace()
}

/// Whether /proc/self/uid_map maps less than the whole id space. Read
/// once per process: a start asks several times, always before the clones
/// that enter new namespaces (libcontainer reads its own answer there).
pub fn in_user_namespace() -> bool {
    static IN_USER_NAMESPACE: OnceLock<bool> = OnceLock::new();
    *IN_USER_NAMESPACE.get_or_init(|| match std::fs::read_to_string("/proc/self/uid_map") {
        Ok(map) => !is_identity_map(&map),
        Err(_) => false,
    })
}

fn is_identity_map(map: &str) -> bool {
    let fields: Vec<&str> = map.split_whitespace().collect();
    fields == ["0", "0", "4294967295"]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_full_identity_map_is_the_host() {
        assert!(is_identity_map("         0          0 4294967295\n"));
        assert!(!is_identity_map("         0       1000          1\n"));
        assert!(!is_identity_map("0 0 4294967295\n1 1 1\n"));
    }
}
