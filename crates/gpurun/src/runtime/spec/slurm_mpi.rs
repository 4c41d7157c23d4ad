//! What an MPI program in a `run --rootfs` or `run --image` container of a
//! Slurm step needs to find the step's PMI: the step's `SLURM_*`
//! variables, PMIx's `PMIX_*` and its server's session directories, and
//! PMI-1/2's `PMI_*`, passed on as enroot's `50-slurm-pmi.sh` hook passes
//! them under pyxis. Pure: the caller gives the environment and says
//! which paths exist.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The environment and the host directories (bound read-write at the same
/// path) that a Slurm step's container gets for its MPI library.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct StepMpi {
    pub env: Vec<String>,
    pub binds: Vec<PathBuf>,
}

/// The step's MPI pass-through, from the runtime's own `env`; nothing
/// outside a step (`SLURM_JOB_ID` and `SLURM_STEP_ID` both set).
pub fn for_step(env: &BTreeMap<String, String>, exists: impl Fn(&Path) -> bool) -> StepMpi {
    let mut out = StepMpi::default();
    let (Some(job), Some(step)) = (env.get("SLURM_JOB_ID"), env.get("SLURM_STEP_ID")) else {
        return out;
    };
    let with_prefix = |prefix: &str| {
        env.iter()
            .filter(|(k, _)| k.starts_with(prefix))
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
    };
    out.env.extend(with_prefix("SLURM_"));
    let pmix_wanted = env
        .get("SLURM_MPI_TYPE")
        .is_none_or(|t| t.starts_with("pmix"));
    let pmix = with_prefix("PMIX_");
    if pmix_wanted && !pmix.is_empty() {
        out.env.extend(pmix);
        // The MCA names newer PMIx reads, from the older module variables.
        for (module, mca) in [
            ("PMIX_PTL_MODULE", "PMIX_MCA_ptl"),
            ("PMIX_SECURITY_MODE", "PMIX_MCA_psec"),
            ("PMIX_GDS_MODULE", "PMIX_MCA_gds"),
        ] {
            if let (Some(value), None) = (env.get(module), env.get(mca)) {
                out.env.push(format!("{mca}={value}"));
            }
        }
        // PMIx's session directories, in its documented precedence.
        let var = |k: &str| env.get(k).filter(|v| !v.is_empty());
        let default_tmp = var("TMPDIR")
            .or(var("TEMP"))
            .or(var("TMP"))
            .map_or("/tmp", String::as_str);
        let system_tmp = var("PMIX_SYSTEM_TMPDIR").map_or(default_tmp, String::as_str);
        let server_tmp = var("PMIX_SERVER_TMPDIR").map_or(default_tmp, String::as_str);
        let uid = env.get("SLURM_JOB_UID").map(String::as_str).unwrap_or("");
        let app_dirs = [
            format!("{system_tmp}/spmix_appdir_{uid}_{job}.{step}"),
            format!("{system_tmp}/spmix_appdir_{job}.{step}"),
        ];
        if let Some(app) = app_dirs.iter().map(PathBuf::from).find(|p| exists(p)) {
            out.binds.push(app);
        }
        if exists(Path::new(server_tmp)) {
            out.binds.push(PathBuf::from(server_tmp));
        }
    }
    out.env.extend(with_prefix("PMI_"));
    out
}

/// How many descriptors past stdio a `run` in a Slurm step keeps so that
/// the container gets PMI-2's socket (`PMI_FD`, inherited from
/// slurmstepd), at least `asked` (`--preserve-fds`).
pub fn preserved_fds(asked: i32, env: &dyn Fn(&str) -> Option<String>) -> i32 {
    if env("SLURM_JOB_ID").is_none() || env("SLURM_STEP_ID").is_none() {
        return asked;
    }
    match env("PMI_FD").and_then(|v| v.parse::<i32>().ok()) {
        Some(fd) if (3..1024).contains(&fd) => asked.max(fd - 2),
        _ => asked,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn a_step_keeps_pmi2_s_descriptor() {
        let step = |fd: &'static str| {
            move |k: &str| match k {
                "SLURM_JOB_ID" | "SLURM_STEP_ID" => Some("1".to_owned()),
                "PMI_FD" => Some(fd.to_owned()),
                _ => None,
            }
        };
        assert_eq!(preserved_fds(0, &step("5")), 3);
        assert_eq!(preserved_fds(4, &step("5")), 4);
        assert_eq!(preserved_fds(0, &step("2")), 0);
        assert_eq!(preserved_fds(0, &step("x")), 0);
        assert_eq!(preserved_fds(1, &|_: &str| None), 1);
    }

    #[test]
    fn outside_a_step_nothing_is_passed() {
        let e = env(&[("SLURM_JOB_ID", "7"), ("PMIX_RANK", "0"), ("PMI_RANK", "0")]);
        assert_eq!(for_step(&e, |_| true), StepMpi::default());
    }

    #[test]
    fn a_pmix_step_passes_its_variables_and_session_directories() {
        let e = env(&[
            ("SLURM_JOB_ID", "7"),
            ("SLURM_STEP_ID", "0"),
            ("SLURM_JOB_UID", "1000"),
            ("SLURM_MPI_TYPE", "pmix_v4"),
            ("PMIX_RANK", "3"),
            ("PMIX_SERVER_TMPDIR", "/var/spool/slurmd/pmix.7.0"),
            ("PMIX_PTL_MODULE", "tcp,usock"),
            ("PMIX_MCA_psec", "native"),
            ("PMIX_SECURITY_MODE", "munge"),
            ("TMPDIR", "/scratch/tmp"),
            ("HOME", "/home/alice"),
        ]);
        let got = for_step(&e, |p| p != Path::new("/scratch/tmp/spmix_appdir_1000_7.0"));
        assert!(got.env.contains(&"SLURM_JOB_UID=1000".into()));
        assert!(got.env.contains(&"PMIX_RANK=3".into()));
        assert!(got.env.contains(&"PMIX_MCA_ptl=tcp,usock".into()));
        // Already set: not overridden from the module variable.
        assert!(!got.env.iter().any(|v| v == "PMIX_MCA_psec=munge"));
        assert!(!got.env.iter().any(|v| v.starts_with("HOME=")));
        assert_eq!(
            got.binds,
            [
                PathBuf::from("/scratch/tmp/spmix_appdir_7.0"),
                PathBuf::from("/var/spool/slurmd/pmix.7.0")
            ]
        );
    }

    #[test]
    fn pmi2_steps_pass_pmi_variables_and_no_pmix_directories() {
        let e = env(&[
            ("SLURM_JOB_ID", "7"),
            ("SLURM_STEP_ID", "1"),
            ("SLURM_MPI_TYPE", "pmi2"),
            ("PMIX_RANK", "0"),
            ("PMI_FD", "5"),
        ]);
        let got = for_step(&e, |_| true);
        assert!(got.env.contains(&"PMI_FD=5".into()));
        assert!(!got.env.iter().any(|v| v.starts_with("PMIX_")));
        assert!(got.binds.is_empty());
    }
}
