//! `NVIDIA_DRIVER_CAPABILITIES`: which parts of the driver a container gets.

use std::collections::BTreeSet;
use std::fmt;

use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Capability {
    Compute,
    Compat32,
    Graphics,
    Utility,
    Video,
    Display,
    Ngx,
}

impl Capability {
    pub const ALL: [Capability; 7] = [
        Capability::Compute,
        Capability::Compat32,
        Capability::Graphics,
        Capability::Utility,
        Capability::Video,
        Capability::Display,
        Capability::Ngx,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Capability::Compute => "compute",
            Capability::Compat32 => "compat32",
            Capability::Graphics => "graphics",
            Capability::Utility => "utility",
            Capability::Video => "video",
            Capability::Display => "display",
            Capability::Ngx => "ngx",
        }
    }
}

impl fmt::Display for Capability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The toolkit's default when the variable is unset or empty.
pub fn default_set() -> BTreeSet<Capability> {
    [Capability::Utility, Capability::Compute].into()
}

pub fn parse(value: Option<&str>) -> Result<BTreeSet<Capability>> {
    let value = value.unwrap_or("").trim();
    if value.is_empty() {
        return Ok(default_set());
    }
    let mut set = BTreeSet::new();
    for item in value.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        if item == "all" {
            return Ok(Capability::ALL.into());
        }
        match Capability::ALL.iter().find(|c| c.name() == item) {
            Some(c) => {
                set.insert(*c);
            }
            None => bail!(
                "NVIDIA_DRIVER_CAPABILITIES: unknown capability {:?}: use compute, compat32, graphics, utility, video, display, ngx or all",
                item.chars().take(32).collect::<String>()
            ),
        }
    }
    if set.is_empty() {
        return Ok(default_set());
    }
    Ok(set)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_all_and_lists() {
        assert_eq!(parse(None).unwrap(), default_set());
        assert_eq!(parse(Some("")).unwrap(), default_set());
        assert_eq!(parse(Some("all")).unwrap().len(), 7);
        assert_eq!(
            parse(Some("utility")).unwrap(),
            [Capability::Utility].into()
        );
        assert_eq!(
            parse(Some("video, compute")).unwrap(),
            [Capability::Video, Capability::Compute].into()
        );
        assert!(parse(Some("compute,gpus")).is_err());
    }
}
