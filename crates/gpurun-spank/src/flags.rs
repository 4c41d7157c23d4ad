//! pyxis's `--container-*` flags, as `srun` takes them, turned into one
//! `gpurun run` command line: pure, so that each flag's meaning is tested
//! without Slurm.

/// What the step asked for: each flag's value (`Some("")` for a flag
/// without one).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Flags {
    pub image: Option<String>,
    pub mounts: Option<String>,
    pub workdir: Option<String>,
    pub name: Option<String>,
    pub save: Option<String>,
    pub mount_home: Option<bool>,
    pub remap_root: Option<bool>,
    pub entrypoint: Option<bool>,
    pub writable: Option<bool>,
    pub env: Option<String>,
}

/// Each flag: its name, whether it takes a value, and its usage line.
pub const FLAGS: &[(&str, bool, &str)] = &[
    (
        "container-image",
        true,
        "[gpurun] the image: a squashfs (.sqsh) or SIF file, run in place",
    ),
    (
        "container-mounts",
        true,
        "[gpurun] SRC[:DST[:ro|rw]],...: bind mounts into the container",
    ),
    (
        "container-workdir",
        true,
        "[gpurun] the working directory inside the container",
    ),
    (
        "container-name",
        true,
        "[gpurun] NAME: keep the container's writable layer for the job's later steps on this node",
    ),
    (
        "container-save",
        true,
        "[gpurun] FILE: once the task ends, save its container (writable) as a squashfs image",
    ),
    (
        "container-mount-home",
        false,
        "[gpurun] bind the user's home directory",
    ),
    (
        "no-container-mount-home",
        false,
        "[gpurun] do not bind the user's home directory (default)",
    ),
    (
        "container-remap-root",
        false,
        "[gpurun] become root inside the container",
    ),
    (
        "no-container-remap-root",
        false,
        "[gpurun] keep your uid inside the container (default)",
    ),
    (
        "container-entrypoint",
        false,
        "[gpurun] run the image's entrypoint, with the task's command as its arguments",
    ),
    (
        "no-container-entrypoint",
        false,
        "[gpurun] do not run the image's entrypoint (default)",
    ),
    (
        "container-writable",
        false,
        "[gpurun] a writable layer over the image, gone with the task",
    ),
    (
        "container-readonly",
        false,
        "[gpurun] the image read-only (default)",
    ),
    (
        "container-env",
        true,
        "[gpurun] NAME,...: these variables keep the job's values over the image's",
    ),
];

impl Flags {
    /// Records flag number `index` of `FLAGS` with its value.
    pub fn set(&mut self, index: usize, value: &str) {
        let value = value.to_owned();
        match FLAGS.get(index).map(|f| f.0) {
            Some("container-image") => self.image = Some(value),
            Some("container-mounts") => self.mounts = Some(value),
            Some("container-workdir") => self.workdir = Some(value),
            Some("container-name") => self.name = Some(value),
            Some("container-save") => self.save = Some(value),
            Some("container-mount-home") => self.mount_home = Some(true),
            Some("no-container-mount-home") => self.mount_home = Some(false),
            Some("container-remap-root") => self.remap_root = Some(true),
            Some("no-container-remap-root") => self.remap_root = Some(false),
            Some("container-entrypoint") => self.entrypoint = Some(true),
            Some("no-container-entrypoint") => self.entrypoint = Some(false),
            Some("container-writable") => self.writable = Some(true),
            Some("container-readonly") => self.writable = Some(false),
            Some("container-env") => self.env = Some(value),
            _ => {}
        }
    }

    /// Whether the step runs in a container at all.
    pub fn wants_container(&self) -> bool {
        self.image.is_some() || self.name.is_some()
    }

    /// `gpurun run`'s arguments for these flags (before `--` and the
    /// task's command), or why they cannot be carried out, as one line.
    /// `task` says whose task it is.
    pub fn run_args(&self, task: &Task) -> Result<Vec<String>, String> {
        let mut args = vec!["run".to_owned()];
        if let Some(image) = self.image.as_deref() {
            check_image(image)?;
            args.extend(["--image".to_owned(), image.to_owned()]);
        }
        if let Some(name) = self.name.as_deref() {
            if self.writable == Some(false) {
                return Err(format!(
                    "--container-name={name} with --container-readonly: a named container keeps a writable layer; leave one of them out"
                ));
            }
            args.extend(["--layer".to_owned(), task.layer_dir(name)?]);
        }
        args.push("--job-env".to_owned());
        if let Some(file) = self.save.as_deref() {
            if self.writable == Some(false) {
                return Err(format!(
                    "--container-save={file} with --container-readonly: a saved container is writable; leave one of them out"
                ));
            }
            if !file.starts_with('/') {
                return Err(format!("--container-save={file}: give an absolute path"));
            }
            // Each task has a container of its own: the node's first saves.
            if task.local_id.as_deref().unwrap_or("0") == "0" {
                args.extend(["--save".to_owned(), file.to_owned()]);
            }
            if self.name.is_none() {
                args.push("--writable".to_owned());
            }
        }
        if self.writable == Some(true) && self.name.is_none() && self.save.is_none() {
            args.push("--writable".into());
        }
        if self.entrypoint == Some(true) {
            args.push("--image-entrypoint".into());
        }
        if self.remap_root != Some(true) {
            args.push("--keep-uid".into());
        }
        for volume in self.volumes(task.home.as_deref())? {
            args.extend(["-v".to_owned(), volume]);
        }
        if let Some(dir) = &self.workdir {
            args.extend(["-w".to_owned(), dir.clone()]);
        }
        for name in self
            .env
            .iter()
            .flat_map(|e| e.split(','))
            .filter(|n| !n.is_empty())
        {
            if name.contains('=') {
                return Err(format!(
                    "--container-env={name}: name variables (NAME,NAME), not values"
                ));
            }
            args.extend(["-e".to_owned(), name.to_owned()]);
        }
        Ok(args)
    }

    /// `-v` values: each `SRC[:DST[:FLAGS]]` of --container-mounts (DST
    /// defaults to SRC; FLAGS ro or rw), then the home directory if asked.
    fn volumes(&self, home: Option<&str>) -> Result<Vec<String>, String> {
        let mut volumes = Vec::new();
        for mount in self
            .mounts
            .iter()
            .flat_map(|m| m.split(','))
            .filter(|m| !m.is_empty())
        {
            let parts: Vec<&str> = mount.split(':').collect();
            let (source, destination, flags) = match parts[..] {
                [s] => (s, s, ""),
                [s, d] => (s, d, ""),
                [s, d, f] => (s, d, f),
                _ => return Err(format!("--container-mounts={mount}: SRC[:DST[:ro|rw]]")),
            };
            let read_only = match flags {
                "" | "rw" => false,
                "ro" => true,
                other => {
                    return Err(format!(
                        "--container-mounts={mount}: flag {other:?} is not supported (ro or rw)"
                    ))
                }
            };
            if !source.starts_with('/') || !destination.starts_with('/') {
                return Err(format!(
                    "--container-mounts={mount}: SRC and DST are absolute paths"
                ));
            }
            volumes.push(format!(
                "{source}:{destination}{}",
                if read_only { ":ro" } else { "" }
            ));
        }
        if self.mount_home == Some(true) {
            let home = home.ok_or("--container-mount-home: the job has no HOME")?;
            volumes.push(format!("{home}:{home}"));
        }
        Ok(volumes)
    }
}

/// An image the plugin can name to gpurun: a file, not a registry's.
fn check_image(image: &str) -> Result<(), String> {
    let file_like = [".sqsh", ".squashfs", ".sif"]
        .iter()
        .any(|e| image.ends_with(e));
    if image.contains("://") || image.contains('#') || !(image.contains('/') || file_like) {
        return Err(format!(
            "--container-image={image}: gpurun runs image files only (.sqsh or .sif); make one with `gpurun import {image} -o FILE.sqsh` and name the file"
        ));
    }
    Ok(())
}

/// Where the plugin keeps named containers' layers on a node: a directory
/// per user (made by the plugin as root, the user's own, 0700), in it a
/// layer per job and name, removed when the job ends (`job_layers`).
pub const LAYERS: &str = "/run/gpurun-spank";

/// The user's directory of layers.
pub fn user_layers(uid: u32) -> String {
    format!("{LAYERS}/{uid}")
}

/// Whether `entry` (a name in the user's directory) is a layer of `job`.
pub fn is_layer_of_job(entry: &str, job: u32) -> bool {
    entry
        .strip_prefix(&format!("{job}."))
        .is_some_and(|name| !name.is_empty())
}

/// Whose task it is: what the plugin's flags need to know of it.
#[derive(Debug, Default, Clone)]
pub struct Task {
    pub uid: u32,
    pub job: Option<String>,
    pub home: Option<String>,
    /// SLURM_LOCALID: the task's number on its node.
    pub local_id: Option<String>,
}

impl Task {
    /// The layer of `--container-name=NAME` for this task's job.
    pub fn layer_dir(&self, name: &str) -> Result<String, String> {
        if name.contains(':') {
            return Err(format!(
                "--container-name={name}: pyxis's NAME:MODE forms (exec, create, no_create, no_exec) are not supported; give the name alone"
            ));
        }
        let valid = !name.is_empty()
            && !name.starts_with('.')
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
        if !valid {
            return Err(format!(
                "--container-name={name}: use letters, digits and \"_-.\", not a leading \".\""
            ));
        }
        let job = self
            .job
            .as_deref()
            .filter(|j| !j.is_empty() && j.chars().all(|c| c.is_ascii_digit()))
            .ok_or("--container-name: the task has no SLURM_JOB_ID")?;
        Ok(format!("{}/{job}.{name}", user_layers(self.uid)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flags(pairs: &[(&str, &str)]) -> Flags {
        let mut flags = Flags::default();
        for (name, value) in pairs {
            let index = FLAGS.iter().position(|f| f.0 == *name).expect(name);
            flags.set(index, value);
        }
        flags
    }

    #[test]
    fn pyxis_defaults_are_read_only_your_own_uid_and_the_jobs_environment() {
        let args = flags(&[("container-image", "./app.sqsh")])
            .run_args(&Task::default())
            .unwrap();
        assert_eq!(
            args,
            ["run", "--image", "./app.sqsh", "--job-env", "--keep-uid"]
        );
    }

    #[test]
    fn each_flag_becomes_its_run_flag() {
        let f = flags(&[
            ("container-image", "/images/pytorch.sqsh"),
            ("container-mounts", "/scratch:/scratch,/data:/in:ro,/opt"),
            ("container-workdir", "/scratch"),
            ("container-writable", ""),
            ("container-remap-root", ""),
            ("container-mount-home", ""),
            ("container-env", "MASTER_ADDR,WORLD_SIZE"),
            ("container-entrypoint", ""),
        ]);
        assert_eq!(
            f.run_args(&Task {
                home: Some("/home/ada".into()),
                ..Task::default()
            }).unwrap().join(" "),
            "run --image /images/pytorch.sqsh --job-env --writable --image-entrypoint -v /scratch:/scratch \
             -v /data:/in:ro -v /opt:/opt -v /home/ada:/home/ada -w /scratch \
             -e MASTER_ADDR -e WORLD_SIZE"
        );
        let later = flags(&[
            ("container-image", "a.sqsh"),
            ("container-writable", ""),
            ("container-readonly", ""),
        ]);
        assert!(!later
            .run_args(&Task::default())
            .unwrap()
            .contains(&"--writable".to_owned()));
    }

    #[test]
    fn a_named_container_is_a_layer_of_the_users_per_job_and_name() {
        let task = Task {
            uid: 1000,
            job: Some("42".into()),
            ..Task::default()
        };
        let first = flags(&[
            ("container-image", "/i/a.sqsh"),
            ("container-name", "dev"),
            ("container-writable", ""),
        ]);
        assert_eq!(
            first.run_args(&task).unwrap().join(" "),
            "run --image /i/a.sqsh --layer /run/gpurun-spank/1000/42.dev --job-env --keep-uid"
        );
        // A later step names the container alone: gpurun takes the image
        // the layer records.
        let later = flags(&[("container-name", "dev")]);
        assert!(later.wants_container());
        assert_eq!(
            later.run_args(&task).unwrap().join(" "),
            "run --layer /run/gpurun-spank/1000/42.dev --job-env --keep-uid"
        );
        // The node's first task saves; the others run writable alone.
        let save = flags(&[
            ("container-image", "/i/a.sqsh"),
            ("container-save", "/s/out.sqsh"),
        ]);
        let second = Task {
            local_id: Some("1".into()),
            ..task.clone()
        };
        assert_eq!(
            save.run_args(&task).unwrap().join(" "),
            "run --image /i/a.sqsh --job-env --save /s/out.sqsh --writable --keep-uid"
        );
        assert_eq!(
            save.run_args(&second).unwrap().join(" "),
            "run --image /i/a.sqsh --job-env --writable --keep-uid"
        );
        assert!(is_layer_of_job("42.dev", 42));
        assert!(!is_layer_of_job("420.dev", 42) && !is_layer_of_job("42.", 42));
    }

    #[test]
    fn what_gpurun_does_not_carry_out_is_refused_with_the_reason() {
        for (pairs, words) in [
            (
                &[("container-image", "docker://nvcr.io#nvidia/pytorch")][..],
                "image files only",
            ),
            (
                &[("container-image", "nvcr.io#nvidia/pytorch:24.01")][..],
                "image files only",
            ),
            (&[("container-image", "ubuntu")][..], "gpurun import ubuntu"),
            (
                &[("container-image", "a.sqsh"), ("container-name", "x:exec")][..],
                "NAME:MODE",
            ),
            (
                &[("container-image", "a.sqsh"), ("container-name", "../x")][..],
                "letters, digits",
            ),
            (&[("container-name", "x")][..], "no SLURM_JOB_ID"),
            (
                &[("container-name", "x"), ("container-readonly", "")][..],
                "keeps a writable layer",
            ),
            (
                &[
                    ("container-image", "a.sqsh"),
                    ("container-save", "/s.sqsh"),
                    ("container-readonly", ""),
                ][..],
                "a saved container is writable",
            ),
            (
                &[("container-image", "a.sqsh"), ("container-save", "s.sqsh")][..],
                "absolute path",
            ),
            (
                &[
                    ("container-image", "a.sqsh"),
                    ("container-mounts", "/a:/b:private"),
                ][..],
                "\"private\"",
            ),
            (
                &[
                    ("container-image", "a.sqsh"),
                    ("container-mounts", "rel:/b"),
                ][..],
                "absolute",
            ),
            (
                &[("container-image", "a.sqsh"), ("container-env", "A=1")][..],
                "not values",
            ),
            (
                &[("container-image", "a.sqsh"), ("container-mount-home", "")][..],
                "no HOME",
            ),
        ] {
            let err = flags(pairs).run_args(&Task::default()).unwrap_err();
            assert!(err.contains(words), "{pairs:?}: {err}");
        }
    }
}
