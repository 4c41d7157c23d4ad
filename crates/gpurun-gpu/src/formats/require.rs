//! The `NVIDIA_REQUIRE_*` language.
//!
//! A value is alternatives separated by spaces (OR); an alternative is
//! constraints separated by commas (AND); a constraint is `key op value` with
//! key `cuda`, `driver`, `arch` or `brand` and op `= != < <= > >=`. Every
//! `NVIDIA_REQUIRE_*` variable must hold, for every selected GPU.
//!
//! `NVIDIA_REQUIRE_CUDA="cuda>=11.0 brand=tesla,driver>=418,driver<419"`

use std::cmp::Ordering;
use std::fmt;

use anyhow::{bail, Result};
use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Key {
    Cuda,
    Driver,
    Arch,
    Brand,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Op {
    #[serde(rename = "=")]
    Eq,
    #[serde(rename = "!=")]
    Ne,
    #[serde(rename = "<")]
    Lt,
    #[serde(rename = "<=")]
    Le,
    #[serde(rename = ">")]
    Gt,
    #[serde(rename = ">=")]
    Ge,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Constraint {
    pub key: Key,
    pub op: Op,
    pub value: String,
}

/// One `NVIDIA_REQUIRE_*` variable, parsed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Requirement {
    pub variable: String,
    pub text: String,
    pub alternatives: Vec<Vec<Constraint>>,
}

/// What a requirement is checked against: host facts and one GPU's.
#[derive(Debug, Clone, Default)]
pub struct Facts<'a> {
    pub cuda: Option<&'a str>,
    pub driver: Option<&'a str>,
    pub arch: Option<&'a str>,
    pub brand: Option<&'a str>,
    /// How the GPU is named in messages, e.g. "GPU 0".
    pub gpu: Option<&'a str>,
}

const MAX_LEN: usize = 4096;

pub fn parse(variable: &str, text: &str) -> Result<Requirement> {
    if text.len() > MAX_LEN {
        bail!(
            "{variable} is {} bytes long: that is no requirement",
            text.len()
        );
    }
    let mut alternatives = Vec::new();
    for alternative in text.split_whitespace() {
        let mut constraints = Vec::new();
        for item in alternative.split(',').filter(|s| !s.is_empty()) {
            constraints.push(parse_constraint(variable, item)?);
        }
        if !constraints.is_empty() {
            alternatives.push(constraints);
        }
    }
    Ok(Requirement {
        variable: variable.to_owned(),
        text: text.to_owned(),
        alternatives,
    })
}

fn parse_constraint(variable: &str, item: &str) -> Result<Constraint> {
    let split = item.find(['=', '!', '<', '>']).filter(|&i| i > 0);
    let Some(at) = split else {
        bail!(
            "{variable}: {:?} is not \"key<op>value\" (e.g. cuda>=12.0)",
            short(item)
        );
    };
    let (key, rest) = item.split_at(at);
    let key = match key.to_ascii_lowercase().as_str() {
        "cuda" => Key::Cuda,
        "driver" => Key::Driver,
        "arch" => Key::Arch,
        "brand" => Key::Brand,
        other => bail!(
            "{variable}: unknown key {:?}: use cuda, driver, arch or brand",
            short(other)
        ),
    };
    let (op, value) = [
        ("!=", Op::Ne),
        ("<=", Op::Le),
        (">=", Op::Ge),
        ("=", Op::Eq),
        ("<", Op::Lt),
        (">", Op::Gt),
    ]
    .iter()
    .find_map(|(sym, op)| rest.strip_prefix(sym).map(|v| (*op, v)))
    .ok_or_else(|| anyhow::anyhow!("{variable}: bad operator in {:?}", short(item)))?;
    if value.is_empty() || value.contains(['=', '<', '>', '!']) {
        bail!("{variable}: {:?} has no single value", short(item));
    }
    if key == Key::Brand {
        if !matches!(op, Op::Eq | Op::Ne) {
            bail!("{variable}: brand takes only = and != in {:?}", short(item));
        }
    } else if parse_version(value).is_none() {
        bail!("{variable}: {:?} is not a version number", short(value));
    }
    Ok(Constraint {
        key,
        op,
        value: value.to_owned(),
    })
}

fn short(s: &str) -> String {
    s.chars().take(64).collect()
}

/// "12.2" → [12, 2]. At most 4 components of up to 9 digits each.
pub fn parse_version(s: &str) -> Option<Vec<u64>> {
    let parts: Vec<&str> = s.split('.').collect();
    if parts.is_empty() || parts.len() > 4 {
        return None;
    }
    parts
        .iter()
        .map(|p| {
            (!p.is_empty() && p.len() <= 9 && p.bytes().all(|b| b.is_ascii_digit()))
                .then(|| p.parse().ok())
                .flatten()
        })
        .collect()
}

fn compare_versions(a: &[u64], b: &[u64]) -> Ordering {
    let n = a.len().max(b.len());
    (0..n)
        .map(|i| a.get(i).unwrap_or(&0).cmp(b.get(i).unwrap_or(&0)))
        .find(|o| *o != Ordering::Equal)
        .unwrap_or(Ordering::Equal)
}

impl Op {
    fn holds(self, ordering: Ordering) -> bool {
        match self {
            Op::Eq => ordering == Ordering::Equal,
            Op::Ne => ordering != Ordering::Equal,
            Op::Lt => ordering == Ordering::Less,
            Op::Le => ordering != Ordering::Greater,
            Op::Gt => ordering == Ordering::Greater,
            Op::Ge => ordering != Ordering::Less,
        }
    }
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Key::Cuda => "cuda",
            Key::Driver => "driver",
            Key::Arch => "arch",
            Key::Brand => "brand",
        })
    }
}

impl Constraint {
    /// Ok, or why not, in words.
    fn check(&self, facts: &Facts) -> std::result::Result<(), String> {
        let gpu = facts.gpu.unwrap_or("the GPU");
        let (actual, what) = match self.key {
            Key::Cuda => (facts.cuda, "driver supports CUDA".to_owned()),
            Key::Driver => (facts.driver, "driver is".to_owned()),
            Key::Arch => (facts.arch, format!("{gpu} has compute capability")),
            Key::Brand => (facts.brand, format!("{gpu} is of brand")),
        };
        let Some(actual) = actual else {
            return Err(format!("{} of {gpu} is unknown", self.key));
        };
        let holds = if self.key == Key::Brand {
            self.op.holds(if actual.eq_ignore_ascii_case(&self.value) {
                Ordering::Equal
            } else {
                Ordering::Less
            })
        } else {
            match (parse_version(actual), parse_version(&self.value)) {
                (Some(a), Some(b)) => self.op.holds(compare_versions(&a, &b)),
                _ => false,
            }
        };
        if holds {
            Ok(())
        } else {
            Err(format!("{what} {actual}"))
        }
    }
}

impl Requirement {
    /// Ok if some alternative holds entirely; else the reason the last
    /// alternative failed, as `VAR "text": reason`.
    pub fn check(&self, facts: &Facts) -> Result<()> {
        if self.alternatives.is_empty() {
            return Ok(());
        }
        let mut reason = String::new();
        for alternative in &self.alternatives {
            match alternative.iter().try_for_each(|c| c.check(facts)) {
                Ok(()) => return Ok(()),
                Err(why) => reason = why,
            }
        }
        bail!("{} {:?}: {reason}", self.variable, self.text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts() -> Facts<'static> {
        Facts {
            cuda: Some("12.2"),
            driver: Some("535.309.01"),
            arch: Some("9.0"),
            brand: Some("nvidia"),
            gpu: Some("GPU 0"),
        }
    }

    #[test]
    fn or_of_ands() {
        let r = parse(
            "NVIDIA_REQUIRE_CUDA",
            "cuda>=13.0 brand=tesla,driver>=418 cuda>=12.0,driver>=535,arch>=8.0",
        )
        .unwrap();
        assert_eq!(r.alternatives.len(), 3);
        r.check(&facts()).unwrap();
    }

    #[test]
    fn failure_names_the_value_and_the_reason() {
        let r = parse("NVIDIA_REQUIRE_CUDA", "cuda>=13.0").unwrap();
        let err = r.check(&facts()).unwrap_err().to_string();
        assert_eq!(
            err,
            "NVIDIA_REQUIRE_CUDA \"cuda>=13.0\": driver supports CUDA 12.2"
        );
        let r = parse("NVIDIA_REQUIRE_ARCH", "arch<8.0").unwrap();
        assert_eq!(
            r.check(&facts()).unwrap_err().to_string(),
            "NVIDIA_REQUIRE_ARCH \"arch<8.0\": GPU 0 has compute capability 9.0"
        );
    }

    #[test]
    fn operators() {
        let f = facts();
        for (text, ok) in [
            ("cuda=12.2", true),
            ("cuda=12.2.0", true),
            ("cuda!=12.2", false),
            ("cuda<12.3", true),
            ("cuda<=12.2", true),
            ("cuda>12.2", false),
            ("cuda>=12", true),
            ("driver>=535.309", true),
            ("driver<535.309.01", false),
            ("brand=NVIDIA", true),
            ("brand!=nvidia", false),
            ("arch>=9.0,cuda>=12.2", true),
        ] {
            let r = parse("NVIDIA_REQUIRE_X", text).unwrap();
            assert_eq!(r.check(&f).is_ok(), ok, "{text}");
        }
    }

    #[test]
    fn malformed_expressions_are_errors() {
        for bad in [
            "cuda",
            "cuda>>12",
            "gpu>=1",
            "cuda>=abc",
            "brand>=tesla",
            ">=12",
            "cuda=",
            "cuda=1.2.3.4.5",
            "cuda>=99999999999999999999",
        ] {
            assert!(parse("NVIDIA_REQUIRE_X", bad).is_err(), "{bad}");
        }
        assert!(parse("NVIDIA_REQUIRE_X", "")
            .unwrap()
            .alternatives
            .is_empty());
    }
}
