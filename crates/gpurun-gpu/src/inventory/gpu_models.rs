//! What a driver version or a GPU model name implies, for hosts where NVML
//! cannot say (no library, or facts read from procfs): tables kept apart
//! from discovery so they can be extended without touching it.

/// The CUDA version a driver branch supports, for hosts without NVML.
pub fn cuda_version_for_driver(driver: &str) -> Option<String> {
    let major: u32 = driver.split('.').next()?.parse().ok()?;
    let table = [
        (580, "13.0"),
        (575, "12.9"),
        (570, "12.8"),
        (565, "12.7"),
        (560, "12.6"),
        (555, "12.5"),
        (550, "12.4"),
        (545, "12.3"),
        (535, "12.2"),
        (530, "12.1"),
        (525, "12.0"),
        (520, "11.8"),
        (515, "11.7"),
        (510, "11.6"),
        (495, "11.5"),
        (470, "11.4"),
        (465, "11.3"),
        (460, "11.2"),
        (455, "11.1"),
        (450, "11.0"),
    ];
    table
        .iter()
        .find(|(m, _)| major >= *m)
        .map(|(_, v)| v.to_string())
}

/// Compute capability from the model name, for hosts without NVML. The
/// first key the name contains wins, so a longer name comes before the
/// shorter one inside it (GB300 before B300, A100 before A10).
pub fn arch_for_model(model: &str) -> Option<String> {
    let m = model.to_ascii_uppercase();
    let table = [
        // Arm hosts: DGX Spark's GB10, the GB200/GB300 NVL72 superchips,
        // Jetson Thor and Orin (Grace Hopper is GH200, below).
        ("GB10", "12.1"),
        ("GB300", "10.3"),
        ("GB200", "10.0"),
        ("THOR", "11.0"),
        ("ORIN", "8.7"),
        ("B300", "10.3"),
        ("RTX PRO 6000 BLACKWELL", "12.0"),
        ("RTX 50", "12.0"),
        ("B200", "10.0"),
        ("B100", "10.0"),
        ("GH200", "9.0"),
        ("H200", "9.0"),
        ("H100", "9.0"),
        ("H800", "9.0"),
        ("L40", "8.9"),
        ("L4", "8.9"),
        ("RTX 40", "8.9"),
        ("A100", "8.0"),
        ("A800", "8.0"),
        ("A30", "8.0"),
        ("A40", "8.6"),
        ("A10", "8.6"),
        ("A16", "8.6"),
        ("A2", "8.6"),
        ("RTX 30", "8.6"),
        ("T4", "7.5"),
        ("RTX 20", "7.5"),
        ("V100", "7.0"),
        ("P100", "6.0"),
        ("P40", "6.1"),
        ("P4", "6.1"),
    ];
    table
        .iter()
        .find(|(k, _)| m.contains(k))
        .map(|(_, v)| v.to_string())
}

/// Brand from the model name, in NVML's lower-case words.
pub fn brand_for_model(model: &str) -> Option<String> {
    let m = model.to_ascii_lowercase();
    let brand = if m.contains("geforce") {
        "geforce"
    } else if m.contains("quadro") {
        "quadro"
    } else if m.contains("titan") {
        "titan"
    } else if m.contains("tesla") {
        "tesla"
    } else if m.contains("nvidia") {
        "nvidia"
    } else {
        return None;
    };
    Some(brand.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_tables() {
        assert_eq!(
            cuda_version_for_driver("535.309.01").as_deref(),
            Some("12.2")
        );
        assert_eq!(
            cuda_version_for_driver("550.54.15").as_deref(),
            Some("12.4")
        );
        assert_eq!(cuda_version_for_driver("390.1"), None);
        assert_eq!(
            arch_for_model("NVIDIA H100 80GB HBM3").as_deref(),
            Some("9.0")
        );
        assert_eq!(
            arch_for_model("NVIDIA A100-SXM4-40GB").as_deref(),
            Some("8.0")
        );
        for (model, arch) in [
            ("NVIDIA GB10", "12.1"),
            ("NVIDIA GB200", "10.0"),
            ("NVIDIA GB300", "10.3"),
            ("NVIDIA B300 SXM6 AC", "10.3"),
            ("NVIDIA GH200 480GB", "9.0"),
            ("NVIDIA Thor", "11.0"),
            ("Orin (nvgpu)", "8.7"),
            ("NVIDIA GeForce RTX 5090", "12.0"),
        ] {
            assert_eq!(arch_for_model(model).as_deref(), Some(arch), "{model}");
        }
        assert_eq!(
            brand_for_model("NVIDIA GeForce RTX 4090").as_deref(),
            Some("geforce")
        );
    }
}
