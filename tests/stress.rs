//! 300 short containers back to back: none hangs, none is left behind.

use std::time::Duration;

use gpurun_tests::*;

#[test]
fn three_hundred_short_runs_neither_hang_nor_leak() {
    require_root!();
    let rt = Runtime::new();
    let bundle = Bundle::busybox();
    bundle.set_args(&["true"]);
    let b = bundle.dir.to_str().unwrap().to_owned();
    let prefix = unique("many");
    for i in 0..300 {
        let id = format!("{prefix}-{i}");
        // A hang (youki 0.7 hangs about one run in five) fails here.
        let out = run_cmd(
            &mut rt.command(["run", "--bundle", &b, &id]),
            Duration::from_secs(20),
        );
        assert_eq!(out.code, 0, "run {i}: {}", out.stderr);
    }
    assert!(rt.leftovers().is_empty(), "{:?}", rt.leftovers());
    let left: Vec<_> = cgroup_dirs("gpurun")
        .into_iter()
        .flat_map(|d| std::fs::read_dir(d).unwrap().flatten())
        .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
        .collect();
    assert!(left.is_empty(), "cgroups left: {left:?}");
    assert!(processes_mentioning(&prefix).is_empty());
}
