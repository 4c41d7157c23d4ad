//! Slurm's `oci.conf`: gpurun as the runtime of `srun --container`.

use std::path::{Path, PathBuf};

use anyhow::{bail, Result};

/// The comment that opens gpurun's lines in an oci.conf.
const SLURM_MARK: &str =
    "# gpurun runs srun --container steps (gpurun setup slurm): the RunTimeRun form";

/// Where container state goes: one directory per user (`%u`), which the
/// runtime makes 0700 and must own, under a sticky directory setup makes.
pub const STATE_PARENT: &str = "/run/gpurun-slurm";

/// The oci.conf beside the site's slurm.conf (`$SLURM_CONF`, else
/// /etc/slurm/slurm.conf), where slurmd looks for it.
pub fn default_oci_conf() -> PathBuf {
    let slurm_conf = std::env::var_os("SLURM_CONF")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/etc/slurm/slurm.conf"));
    slurm_conf
        .parent()
        .unwrap_or(Path::new("/etc/slurm"))
        .join("oci.conf")
}

/// The comment that opens gpurun's line in a plugstack.conf.
const SPANK_MARK: &str =
    "# gpurun's SPANK plugin: srun --container-image (gpurun setup slurm --spank)";

/// The plugstack.conf slurm.conf names (PlugStackConfig), else the one
/// beside slurm.conf, where Slurm looks by default.
pub fn default_plugstack() -> PathBuf {
    let slurm_conf = std::env::var_os("SLURM_CONF")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/etc/slurm/slurm.conf"));
    let named = std::fs::read_to_string(&slurm_conf).ok().and_then(|text| {
        text.lines().find_map(|line| {
            let (key, value) = line.split_once('=')?;
            key.trim()
                .eq_ignore_ascii_case("PlugStackConfig")
                .then(|| PathBuf::from(value.trim()))
        })
    });
    named.unwrap_or_else(|| {
        slurm_conf
            .parent()
            .unwrap_or(Path::new("/etc/slurm"))
            .join("plugstack.conf")
    })
}

/// The plugin's plugstack.conf line: `required PLUGIN gpurun=BINARY` and
/// the driver locations, which Slurm splits on spaces.
pub fn plugstack_line(
    plugin: &Path,
    binary: &str,
    driver_flags: &[(&str, PathBuf)],
) -> Result<String> {
    let mut words = vec![
        "required".to_owned(),
        plugin.display().to_string(),
        format!("gpurun={binary}"),
    ];
    for (flag, path) in driver_flags {
        words.push(format!(
            "{}={}",
            flag.trim_start_matches('-'),
            path.display()
        ));
    }
    if let Some(bad) = words.iter().find(|w| w.contains(char::is_whitespace)) {
        bail!("{bad}: Slurm splits plugstack.conf lines on spaces; use paths without them");
    }
    Ok(words.join(" "))
}

/// gpurun's plugin line in a plugstack.conf, replacing one there was;
/// other plugins' lines (pyxis's among them) stay.
pub fn edit_plugstack(text: &str, line: &str) -> String {
    let is_ours = |l: &str| l.trim() == SPANK_MARK || l.contains("spank_gpurun.so");
    super::replace_lines(text, is_ours, &[SPANK_MARK.to_owned(), line.to_owned()])
}

/// gpurun's RunTime* lines in an oci.conf, replacing any there were (the
/// create/start form among them: in Slurm 22.05 the container's init
/// inherits the pipe slurmstepd reads RunTimeCreate's output from, so the
/// step hangs; RunTimeRun does not). Other keys stay as they are.
pub fn edit_slurm(text: &str, command: &str) -> String {
    let id = "%n.%u.%j.%s.%t";
    let ours = [
        SLURM_MARK.to_owned(),
        format!("RunTimeQuery=\"{command} state {id}\""),
        format!("RunTimeKill=\"{command} kill -a {id}\""),
        format!("RunTimeDelete=\"{command} delete --force {id}\""),
        format!("RunTimeRun=\"{command} run {id} -b %b\""),
    ];
    let is_ours = |line: &str| {
        let trimmed = line.trim();
        let key = trimmed.split('=').next().unwrap_or("").trim();
        trimmed == SLURM_MARK || key.to_ascii_lowercase().starts_with("runtime")
    };
    super::replace_lines(text, is_ours, &ours)
}

/// The runtime's command line: the binary, the driver locations gpurun's
/// own flags, environment or config give (slurmstepd starts the runtime
/// with slurmd's environment, whose HOME may be root's), and a state
/// directory per user. slurmstepd splits it on spaces, so only plain
/// paths are taken.
pub fn slurm_command(binary: &str, driver_flags: &[(&str, PathBuf)]) -> Result<String> {
    let plain = |word: &str| {
        !word.is_empty()
            && word
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"/-_.+@:,".contains(&b))
    };
    let mut command = binary.to_owned();
    let mut words = vec![binary.to_owned()];
    for (flag, path) in driver_flags {
        let path = path.display().to_string();
        command.push_str(&format!(" {flag} {path}"));
        words.push(path);
    }
    if let Some(bad) = words.iter().find(|w| !plain(w)) {
        bail!("{bad}: slurmstepd splits the runtime's command on spaces; use paths without spaces, quotes or shell characters");
    }
    command.push_str(&format!(" --root={STATE_PARENT}/%u"));
    Ok(command)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plugin_line_is_replaced_and_other_plugins_kept() {
        let line = plugstack_line(
            Path::new("/usr/lib/gpurun/spank_gpurun.so"),
            "/usr/bin/gpurun",
            &[("--driver-root", PathBuf::from("/run/nvidia/driver"))],
        )
        .unwrap();
        assert_eq!(
            line,
            "required /usr/lib/gpurun/spank_gpurun.so gpurun=/usr/bin/gpurun driver-root=/run/nvidia/driver"
        );
        let old = "optional /usr/lib/x86_64-linux-gnu/slurm/spank_pyxis.so\nrequired /old/spank_gpurun.so gpurun=/x\n";
        let new = edit_plugstack(old, &line);
        assert!(new.starts_with("optional /usr/lib/x86_64-linux-gnu/slurm/spank_pyxis.so\n"));
        assert_eq!(new.matches("spank_gpurun.so").count(), 1, "{new}");
        assert_eq!(edit_plugstack(&new, &line), new);
        assert!(plugstack_line(Path::new("/a b/p.so"), "/g", &[]).is_err());
    }

    #[test]
    fn runtime_lines_are_replaced_and_the_rest_kept() {
        let old = "IgnoreFileConfigJson=true\nRunTimeCreate=\"runc create %n.%u.%j.%s.%t -b %b\"\nRunTimeStart=\"runc start %n.%u.%j.%s.%t\"\nRunTimeKill=\"runc kill -a %n.%u.%j.%s.%t\"\n";
        let new = edit_slurm(old, "/usr/bin/gpurun --root=/run/gpurun-slurm/%u");
        assert!(
            new.starts_with("IgnoreFileConfigJson=true\n\n# gpurun"),
            "{new}"
        );
        assert!(!new.contains("runc"), "{new}");
        assert!(
            !new.contains("RunTimeCreate") && !new.contains("RunTimeStart"),
            "{new}"
        );
        assert!(new.contains("RunTimeRun=\"/usr/bin/gpurun --root=/run/gpurun-slurm/%u run %n.%u.%j.%s.%t -b %b\"\n"), "{new}");
        // A second run changes nothing.
        assert_eq!(
            edit_slurm(&new, "/usr/bin/gpurun --root=/run/gpurun-slurm/%u"),
            new
        );
    }

    #[test]
    fn the_command_carries_driver_locations_and_a_per_user_root() {
        let command = slurm_command(
            "/opt/gpurun",
            &[("--driver-root", PathBuf::from("/usr/local/nvidia"))],
        )
        .unwrap();
        assert_eq!(
            command,
            "/opt/gpurun --driver-root /usr/local/nvidia --root=/run/gpurun-slurm/%u"
        );
        assert!(slurm_command("/opt/my gpurun", &[]).is_err());
    }
}
