//! gpurun's command line when Slurm starts it as a task's program under
//! the SPANK plugin (`crates/gpurun-spank`): the plugin made argv[0] this
//! binary and left the `gpurun run` flags and the task program's own
//! argv[0] in the task's environment; the rest of argv is the program's
//! arguments, untouched.

use std::ffi::OsString;

/// The variables `spank_gpurun.so` sets (its `RUN_VAR` and `ARGV0_VAR`).
const RUN_VAR: &str = "GPURUN_SPANK_RUN";
const ARGV0_VAR: &str = "GPURUN_SPANK_ARGV0";

/// This process's command line: rebuilt as `gpurun FLAGS... -- PROGRAM
/// ARGS...` for a SPANK task, else as given.
pub fn command_line() -> Vec<OsString> {
    let given: Vec<OsString> = std::env::args_os().collect();
    let (Some(run), Some(argv0)) = (std::env::var(RUN_VAR).ok(), std::env::var_os(ARGV0_VAR))
    else {
        return given;
    };
    match rebuild(given, &run, argv0) {
        Ok(line) => line,
        Err(why) => {
            eprintln!("gpurun: error: {RUN_VAR}: {why}: the SPANK plugin and this gpurun do not match (reinstall both)");
            std::process::exit(1);
        }
    }
}

fn rebuild(given: Vec<OsString>, run: &str, argv0: OsString) -> Result<Vec<OsString>, String> {
    let flags: Vec<String> = serde_json::from_str(run).map_err(|e| e.to_string())?;
    if !flags.iter().any(|f| f == "run") {
        return Err("no run command".into());
    }
    let mut given = given.into_iter();
    let mut line = vec![given.next().unwrap_or_else(|| "gpurun".into())];
    line.extend(flags.into_iter().map(OsString::from));
    line.push("--".into());
    line.push(argv0);
    line.extend(given);
    Ok(line)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tasks_program_follows_the_plugins_flags_untouched() {
        let given = ["/usr/bin/gpurun", "--version", "-c", "x y"]
            .map(OsString::from)
            .to_vec();
        let line = rebuild(
            given,
            r#"["--driver-root","/d","run","--image","a.sqsh"]"#,
            "python3".into(),
        )
        .unwrap();
        assert_eq!(
            line,
            [
                "/usr/bin/gpurun",
                "--driver-root",
                "/d",
                "run",
                "--image",
                "a.sqsh",
                "--",
                "python3",
                "--version",
                "-c",
                "x y"
            ]
            .map(OsString::from)
        );
        assert!(rebuild(vec![], "not json", "x".into()).is_err());
        assert!(rebuild(vec![], r#"["exec","x"]"#, "x".into()).is_err());
    }
}
