//! The current user's id mappings for user namespaces: its own id, plus the
//! subordinate ranges from /etc/subuid and /etc/subgid when newuidmap and
//! newgidmap can write them.

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use serde::Serialize;

/// One line of /etc/subuid or /etc/subgid that belongs to us.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct SubRange {
    pub start: u32,
    pub count: u32,
}

/// The ranges of `file` (subuid/subgid syntax, `name_or_id:start:count`)
/// that belong to the user called `name` with id `id`.
pub fn parse_subids(text: &str, name: &str, id: u32) -> Vec<SubRange> {
    let id = id.to_string();
    text.lines()
        .filter_map(|line| {
            let mut fields = line.trim().split(':');
            let owner = fields.next()?;
            let start = fields.next()?.parse().ok()?;
            let count = fields.next()?.parse().ok()?;
            (fields.next().is_none() && (owner == name || owner == id) && count > 0)
                .then_some(SubRange { start, count })
        })
        .collect()
}

/// newuidmap and newgidmap, when both are installed in a system directory.
pub fn map_helpers() -> Option<(PathBuf, PathBuf)> {
    let find = |name: &str| {
        ["/usr/bin", "/bin", "/usr/sbin", "/sbin", "/usr/local/bin"]
            .iter()
            .map(|dir| Path::new(dir).join(name))
            .find(|p| p.is_file())
    };
    Some((find("newuidmap")?, find("newgidmap")?))
}

/// One id mapping line: (id in the container, id on the host, count).
pub type IdMap = (u32, u32, u32);
/// uid mappings and gid mappings.
pub type IdMaps = (Vec<IdMap>, Vec<IdMap>);

/// What the current user may map: uid, gid and their subordinate ranges.
#[derive(Debug, Clone, Serialize)]
pub struct UserIds {
    pub name: String,
    pub uid: u32,
    pub gid: u32,
    pub subuids: Vec<SubRange>,
    pub subgids: Vec<SubRange>,
}

impl UserIds {
    pub fn current() -> UserIds {
        let uid = nix::unistd::getuid().as_raw();
        let gid = nix::unistd::getgid().as_raw();
        let name = nix::unistd::User::from_uid(uid.into())
            .ok()
            .flatten()
            .map(|u| u.name)
            .unwrap_or_default();
        // Both files name the user (by login name or uid), as newuidmap and
        // newgidmap read them: /etc/subgid is not keyed by group.
        let read = |file: &str| {
            std::fs::read_to_string(file)
                .map(|text| parse_subids(&text, &name, uid))
                .unwrap_or_default()
        };
        UserIds {
            subuids: read("/etc/subuid"),
            subgids: read("/etc/subgid"),
            name,
            uid,
            gid,
        }
    }

    /// Container root is us; container ids 1.. are our first subordinate
    /// range, when we have one for both uids and gids and the helpers to
    /// write it. Returns (uid map, gid map) as (container, host, size).
    pub fn root_mappings(&self) -> IdMaps {
        let mut uids = vec![(0, self.uid, 1)];
        let mut gids = vec![(0, self.gid, 1)];
        if let (Some(su), Some(sg), Some(_)) =
            (self.subuids.first(), self.subgids.first(), map_helpers())
        {
            uids.push((1, su.start, su.count));
            gids.push((1, sg.start, sg.count));
        }
        (uids, gids)
    }

    /// `--keep-uid`: our ids stay ours inside, and the rest of the first
    /// subordinate range fills the ids around them. libcontainer becomes
    /// root in the namespace before it switches to the process user, so
    /// container id 0 must be mapped: without a subordinate range this
    /// cannot work.
    pub fn keep_mappings(&self) -> anyhow::Result<IdMaps> {
        let (Some(su), Some(sg), Some(_)) =
            (self.subuids.first(), self.subgids.first(), map_helpers())
        else {
            anyhow::bail!(
                "--keep-uid needs subordinate ids for {:?} in /etc/subuid and /etc/subgid, and newuidmap/newgidmap (apt-get install uidmap)",
                self.name
            );
        };
        let around = |id: u32, r: &SubRange| {
            let mut maps = vec![(0, r.start, id.min(r.count))];
            if r.count > id {
                maps.push((id + 1, r.start + id, r.count - id));
            }
            maps.insert(1, (id, id, 1));
            maps.retain(|m| m.2 > 0);
            maps
        };
        Ok((around(self.uid, su), around(self.gid, sg)))
    }

    /// Writes the mappings of `root_mappings` for the user namespace of
    /// process `pid`: through newuidmap/newgidmap when subordinate ids are
    /// mapped, directly (setgroups denied) when only our own id is.
    pub fn map_as_root(&self, pid: u32) -> Result<()> {
        let (uids, gids) = self.root_mappings();
        if uids.len() > 1 {
            let (newuidmap, newgidmap) = map_helpers().context("newuidmap is missing")?;
            for (helper, maps) in [(newuidmap, &uids), (newgidmap, &gids)] {
                let mut cmd = std::process::Command::new(&helper);
                cmd.arg(pid.to_string()).env_clear();
                for (c, h, n) in maps.iter() {
                    cmd.args([c.to_string(), h.to_string(), n.to_string()]);
                }
                let out = cmd
                    .output()
                    .with_context(|| format!("run {}", helper.display()))?;
                if !out.status.success() {
                    bail!(
                        "{} failed: {}",
                        helper.display(),
                        String::from_utf8_lossy(&out.stderr).trim()
                    );
                }
            }
        } else {
            // Our own id alone needs no helper, but setgroups must be denied.
            fs::write(format!("/proc/{pid}/setgroups"), "deny")?;
            fs::write(
                format!("/proc/{pid}/uid_map"),
                format!("0 {} 1\n", self.uid),
            )?;
            fs::write(
                format!("/proc/{pid}/gid_map"),
                format!("0 {} 1\n", self.gid),
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subids_by_name_or_uid() {
        let text = "alice:100000:65536\n1001:300000:1000\nbob:200000:65536\n# x\nalice:bad:1\n";
        assert_eq!(
            parse_subids(text, "alice", 1000),
            [SubRange {
                start: 100000,
                count: 65536
            }]
        );
        assert_eq!(
            parse_subids(text, "carol", 1001),
            [SubRange {
                start: 300000,
                count: 1000
            }]
        );
        assert!(parse_subids(text, "dave", 7).is_empty());
        assert!(parse_subids("x:1:0\n", "x", 1).is_empty());
    }

    #[test]
    fn keep_uid_maps_the_range_around_our_id() {
        let ids = UserIds {
            name: "alice".into(),
            uid: 1000,
            gid: 100,
            subuids: vec![SubRange {
                start: 100000,
                count: 65536,
            }],
            subgids: vec![SubRange {
                start: 100000,
                count: 50,
            }],
        };
        if map_helpers().is_none() {
            assert!(ids.keep_mappings().is_err());
            return;
        }
        let (uids, gids) = ids.keep_mappings().unwrap();
        assert_eq!(
            uids,
            [(0, 100000, 1000), (1000, 1000, 1), (1001, 101000, 64536)]
        );
        assert_eq!(gids, [(0, 100000, 50), (100, 100, 1)]);
        let none = UserIds {
            subuids: vec![],
            ..ids
        };
        assert!(none.keep_mappings().is_err());
    }
}
