//! Which protection a root `run` gets, from its spec: the exec stub where
//! no process of the container can reach the binary or a process running
//! it before the program starts (the reasoning is in `exec_stub`), the
//! protected re-exec (`seal`) otherwise.

use std::fs::File;
use std::io;

use anyhow::{Context, Result};
use libcontainer::oci_spec::runtime::{
    Capability, Hook, LinuxNamespaceType, LinuxSeccomp, LinuxSeccompAction, Spec,
};

use crate::runtime::protect::{exec_stub, seal};

/// Where main left this process's protection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protection {
    /// Done: re-exec'd already, or never needed (no container is entered,
    /// or the caller is not root).
    Done,
    /// A root `run`, which chooses once its spec is read (`protect_run`):
    /// `create` and `exec` re-exec before anything else.
    ChosenByRun,
}

/// A root `run`'s protection, chosen from its spec before anything is
/// made (a re-exec starts the command over): the exec stub where it is
/// enough, the protected re-exec otherwise. Does nothing where main
/// already protected this process (or left `run` to nobody: not root).
pub fn protect_run(protection: Protection, spec: Option<&Spec>) -> Result<()> {
    if protection != Protection::ChosenByRun {
        return Ok(());
    }
    let verdict = spec
        .ok_or_else(|| "the spec could not be read here".to_owned())
        .and_then(stub_protects)
        .and_then(|()| exec_stub::load().map_err(|e| format!("no exec stub ({e})")));
    match verdict {
        Ok(()) => {
            // The init and intermediate are clones of this process: no
            // container process may open their /proc/<pid>/exe (see
            // exec_stub). SAFETY: a prctl on this process only.
            if unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) } != 0 {
                return Err(io::Error::last_os_error()).context("make gpurun non-dumpable");
            }
            tracing::debug!(target: "gpurun", "protection: the program is exec'd through a sealed stub, no re-exec");
            Ok(())
        }
        Err(why) => {
            // Said once: not again by the re-exec'd `run`, which comes here
            // with the same spec.
            if !File::open("/proc/self/exe").is_ok_and(|exe| seal::runs_protected(&exe)) {
                tracing::debug!(target: "gpurun", "protection: protected re-exec ({why})");
            }
            seal::ensure_sealed()
        }
    }
}

/// Why the exec stub would not keep this container's processes away from
/// the host's binary (the reasoning is in `exec_stub`), or `Ok` when it
/// does.
pub fn stub_protects(spec: &Spec) -> Result<(), String> {
    if !exec_stub::built() {
        return Err("this build has no exec stub".into());
    }
    let linux = spec.linux().as_ref().ok_or("no linux section")?;
    let namespaces = linux.namespaces().as_deref().unwrap_or_default();
    if !namespaces
        .iter()
        .any(|n| n.typ() == LinuxNamespaceType::Pid && n.path().is_none())
    {
        return Err("the container does not get a pid namespace of its own".into());
    }
    if namespaces
        .iter()
        .any(|n| n.typ() == LinuxNamespaceType::User)
    {
        return Err("a user namespace".into());
    }
    if let Some(process) = spec.process() {
        let bounding = process
            .capabilities()
            .as_ref()
            .and_then(|c| c.bounding().as_ref());
        if bounding.is_some_and(|b| b.contains(&Capability::SysPtrace)) {
            return Err("CAP_SYS_PTRACE in the bounding set".into());
        }
        if process
            .selinux_label()
            .as_deref()
            .is_some_and(|l| !l.is_empty())
        {
            return Err("an SELinux label (its transition would apply to the stub)".into());
        }
        if process
            .apparmor_profile()
            .as_deref()
            .is_some_and(|p| !p.is_empty())
        {
            return Err("an AppArmor profile (its transition would apply to the stub)".into());
        }
    }
    if let Some(hooks) = spec.hooks() {
        // NVIDIA's CDI hooks in these lists are carried out by gpurun
        // itself and never run as processes.
        let runs = |h: &Hook| !gpurun_gpu::flow::hook_done_natively(h);
        #[allow(deprecated)]
        let done_natively = [
            hooks.prestart(),
            hooks.create_runtime(),
            hooks.create_container(),
        ];
        if done_natively
            .iter()
            .any(|list| list.as_ref().is_some_and(|l| l.iter().any(runs)))
            || hooks
                .start_container()
                .as_ref()
                .is_some_and(|l| !l.is_empty())
        {
            return Err("hooks that run before the program starts".into());
        }
    }
    // CDI names a spec file may answer with hooks of its own, added after
    // this choice is made.
    if gpurun_gpu::flow::may_add_hooks(spec) {
        return Err("CDI device names, which a CDI spec may answer with hooks".into());
    }
    if let Some(seccomp) = linux.seccomp() {
        for name in ["execve", "execveat"] {
            if !seccomp_allows(seccomp, name) {
                return Err(format!("the seccomp profile may refuse {name}"));
            }
        }
    }
    Ok(())
}

/// Whether the profile lets every call of `name` through.
fn seccomp_allows(seccomp: &LinuxSeccomp, name: &str) -> bool {
    let allows = |action: LinuxSeccompAction| {
        matches!(
            action,
            LinuxSeccompAction::ScmpActAllow | LinuxSeccompAction::ScmpActLog
        )
    };
    let rules: Vec<_> = seccomp
        .syscalls()
        .as_deref()
        .unwrap_or_default()
        .iter()
        .filter(|r| r.names().iter().any(|n| n == name))
        .collect();
    if rules.is_empty() {
        return allows(seccomp.default_action());
    }
    let unconditional = rules
        .iter()
        .any(|r| r.args().as_ref().is_none_or(|a| a.is_empty()));
    rules.iter().all(|r| allows(r.action())) && (unconditional || allows(seccomp.default_action()))
}

#[cfg(test)]
mod tests {
    use super::*;
    fn spec_with(edit: impl FnOnce(&mut serde_json::Value)) -> Spec {
        let mut value = serde_json::to_value(Spec::default()).unwrap();
        edit(&mut value);
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn the_default_spec_needs_no_re_exec() {
        if exec_stub::built() {
            assert_eq!(stub_protects(&Spec::default()), Ok(()));
        }
    }

    #[test]
    fn anything_that_could_reach_the_init_keeps_the_re_exec() {
        let refused = |edit: fn(&mut serde_json::Value)| stub_protects(&spec_with(edit)).is_err();
        assert!(refused(|c| c["process"]["capabilities"]["bounding"]
            .as_array_mut()
            .unwrap()
            .push("CAP_SYS_PTRACE".into())));
        assert!(refused(|c| c["linux"]["namespaces"]
            .as_array_mut()
            .unwrap()
            .retain(|n| n["type"] != "pid")));
        assert!(refused(|c| {
            for n in c["linux"]["namespaces"].as_array_mut().unwrap() {
                if n["type"] == "pid" {
                    n["path"] = "/proc/1/ns/pid".into();
                }
            }
        }));
        assert!(refused(|c| c["linux"]["namespaces"]
            .as_array_mut()
            .unwrap()
            .push(serde_json::json!({"type": "user"}))));
        assert!(refused(
            |c| c["hooks"] = serde_json::json!({"startContainer": [{"path": "/x"}]})
        ));
        assert!(refused(
            |c| c["hooks"] = serde_json::json!({"prestart": [{"path": "/x"}]})
        ));
        assert!(refused(
            |c| c["process"]["apparmorProfile"] = "docker-default".into()
        ));
        assert!(refused(
            |c| c["process"]["selinuxLabel"] = "system_u:system_r:container_t:s0".into()
        ));
        // After start, hooks cannot reach a clone of ours.
        assert!(
            !refused(|c| c["hooks"] = serde_json::json!({"poststart": [{"path": "/x"}]}))
                || !exec_stub::built()
        );
        // CDI names a spec file may answer with hooks added later.
        assert!(refused(
            |c| c["annotations"] = serde_json::json!({"cdi.k8s.io/x": "example.com/net=a"})
        ));
        assert!(refused(|c| c["process"]["env"]
            .as_array_mut()
            .unwrap()
            .push("NVIDIA_VISIBLE_DEVICES=nvidia.com/gpu=0".into())));
        // NVIDIA's CDI hooks, done by gpurun itself, are no hooks at all;
        // a startContainer one is not taken, and runs.
        assert!(
            stub_protects(&spec_with(|c| {
                c["hooks"] = serde_json::json!({"createContainer": [{"path": "/usr/bin/nvidia-cdi-hook",
                    "args": ["nvidia-cdi-hook", "update-ldcache", "--folder", "/usr/lib"]}]})
            }))
            .is_ok()
                || !exec_stub::built()
        );
        assert!(refused(|c| {
            c["hooks"] = serde_json::json!({"startContainer": [{"path": "/usr/bin/nvidia-cdi-hook",
                "args": ["nvidia-cdi-hook", "update-ldcache", "--folder", "/usr/lib"]}]})
        }));
    }

    #[test]
    fn seccomp_must_let_both_execs_through_whatever_their_arguments() {
        let profile = |v: serde_json::Value| -> LinuxSeccomp { serde_json::from_value(v).unwrap() };
        let docker_like = profile(serde_json::json!({
            "defaultAction": "SCMP_ACT_ERRNO",
            "syscalls": [{"names": ["execve", "execveat", "read"], "action": "SCMP_ACT_ALLOW"}]
        }));
        assert!(seccomp_allows(&docker_like, "execve") && seccomp_allows(&docker_like, "execveat"));
        let no_execveat = profile(serde_json::json!({
            "defaultAction": "SCMP_ACT_ERRNO",
            "syscalls": [{"names": ["execve"], "action": "SCMP_ACT_ALLOW"}]
        }));
        assert!(!seccomp_allows(&no_execveat, "execveat"));
        let denied = profile(serde_json::json!({
            "defaultAction": "SCMP_ACT_ALLOW",
            "syscalls": [{"names": ["execveat"], "action": "SCMP_ACT_ERRNO"}]
        }));
        assert!(seccomp_allows(&denied, "execve") && !seccomp_allows(&denied, "execveat"));
        let by_argument = profile(serde_json::json!({
            "defaultAction": "SCMP_ACT_ERRNO",
            "syscalls": [{"names": ["execveat"], "action": "SCMP_ACT_ALLOW",
                          "args": [{"index": 4, "value": 0, "op": "SCMP_CMP_EQ"}]}]
        }));
        assert!(!seccomp_allows(&by_argument, "execveat"));
    }
}
