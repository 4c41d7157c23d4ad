//! Every input kept in `fuzz/corpus/<target>` through its fuzz target's
//! body (`src/fuzzing.rs`) on the stable toolchain: the corpus, which
//! holds the inputs libFuzzer found and any that once failed, is a
//! regression suite of `cargo test`. Exploring for new inputs needs the
//! nightly toolchain: `sh scripts/ci/fuzz.sh SECONDS`.

use std::path::{Path, PathBuf};

use gpurun_gpu::fuzzing;

/// A target's name and its body.
type Target = (&'static str, fn(&[u8]));

const TARGETS: &[Target] = &[
    ("cdi_hook", fuzzing::cdi_hook::run),
    ("cdi_spec", fuzzing::cdi_spec::run),
    ("compat_note", fuzzing::compat_note::run),
    ("devlist", fuzzing::devlist::run),
    ("ldcache", fuzzing::ldcache::run),
    ("require", fuzzing::require::run),
    ("slurm", fuzzing::slurm::run),
    ("spec", fuzzing::spec::run),
    ("tegra_csv", fuzzing::tegra_csv::run),
];

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz")
}

fn replay(target: &str) {
    let run = TARGETS.iter().find(|(name, _)| *name == target).unwrap().1;
    let dir = fuzz_dir().join("corpus").join(target);
    let mut inputs: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .collect();
    inputs.sort();
    assert!(!inputs.is_empty(), "no corpus in {}", dir.display());
    for input in &inputs {
        let data = std::fs::read(input).unwrap();
        if std::panic::catch_unwind(|| run(&data)).is_err() {
            panic!("{target} panics on {}", input.display());
        }
    }
}

#[test]
fn every_fuzz_target_is_replayed() {
    let mut on_disk: Vec<String> = std::fs::read_dir(fuzz_dir().join("fuzz_targets"))
        .unwrap()
        .map(|e| {
            e.unwrap()
                .path()
                .file_stem()
                .unwrap()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    on_disk.sort();
    let listed: Vec<&str> = TARGETS.iter().map(|(name, _)| *name).collect();
    assert_eq!(on_disk, listed);
}

#[test]
fn cdi_hook_corpus() {
    replay("cdi_hook");
}

#[test]
fn cdi_spec_corpus() {
    replay("cdi_spec");
}

#[test]
fn compat_note_corpus() {
    replay("compat_note");
}

#[test]
fn devlist_corpus() {
    replay("devlist");
}

#[test]
fn ldcache_corpus() {
    replay("ldcache");
}

#[test]
fn require_corpus() {
    replay("require");
}

#[test]
fn slurm_corpus() {
    replay("slurm");
}

#[test]
fn spec_corpus() {
    replay("spec");
}

#[test]
fn tegra_csv_corpus() {
    replay("tegra_csv");
}
