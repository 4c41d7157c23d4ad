//! Signal names and numbers as runc takes them: `9`, `KILL`, `SIGKILL`,
//! `sigkill`, and the real-time ones (`34`, `RTMIN`, `SIGRTMIN+3`,
//! `RTMAX-1`), which systemd in a container uses to shut down.

use anyhow::{bail, Result};

/// The signal number for `text`, 0 (no signal, an existence check) through
/// SIGRTMAX.
pub fn parse(text: &str) -> Result<i32> {
    let max = libc::SIGRTMAX();
    if let Ok(number) = text.parse::<i32>() {
        if (0..=max).contains(&number) {
            return Ok(number);
        }
        bail!("signal {number} is out of range: use a number from 1 to {max}, or a name such as SIGTERM");
    }
    let upper = text.to_ascii_uppercase();
    let name = upper.strip_prefix("SIG").unwrap_or(&upper);
    if let Some(number) = real_time(name) {
        return Ok(number);
    }
    let full = format!("SIG{name}");
    match full.parse::<nix::sys::signal::Signal>() {
        Ok(signal) => Ok(signal as i32),
        Err(_) => bail!(
            "unknown signal {text:?}: use a name such as SIGTERM, KILL or RTMIN+3, or a number such as 9"
        ),
    }
}

/// `RTMIN`, `RTMIN+n`, `RTMAX`, `RTMAX-n`, within SIGRTMIN..=SIGRTMAX.
fn real_time(name: &str) -> Option<i32> {
    let (min, max) = (libc::SIGRTMIN(), libc::SIGRTMAX());
    let number = if let Some(rest) = name.strip_prefix("RTMIN") {
        min + offset(rest, '+')?
    } else if let Some(rest) = name.strip_prefix("RTMAX") {
        max - offset(rest, '-')?
    } else {
        return None;
    };
    (min..=max).contains(&number).then_some(number)
}

fn offset(rest: &str, sign: char) -> Option<i32> {
    if rest.is_empty() {
        return Some(0);
    }
    rest.strip_prefix(sign)?
        .parse::<i32>()
        .ok()
        .filter(|n| *n >= 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_in_every_spelling() {
        for text in ["9", "KILL", "SIGKILL", "kill", "sigkill", "SigKill"] {
            assert_eq!(parse(text).unwrap(), libc::SIGKILL, "{text}");
        }
        assert_eq!(parse("USR1").unwrap(), libc::SIGUSR1);
        assert_eq!(parse("SIGWINCH").unwrap(), libc::SIGWINCH);
        assert_eq!(parse("0").unwrap(), 0);
    }

    #[test]
    fn real_time_signals() {
        let (min, max) = (libc::SIGRTMIN(), libc::SIGRTMAX());
        assert_eq!(parse("RTMIN").unwrap(), min);
        assert_eq!(parse("SIGRTMIN+3").unwrap(), min + 3);
        assert_eq!(parse("rtmax-1").unwrap(), max - 1);
        assert_eq!(parse("RTMAX").unwrap(), max);
        assert_eq!(parse(&max.to_string()).unwrap(), max);
        assert!(parse(&format!("RTMIN+{}", max - min + 1)).is_err());
        assert!(parse("RTMIN-1").is_err());
    }

    #[test]
    fn bad_signals_are_refused() {
        for text in ["", "-1", "65", "SIGBOGUS", "RTMIN+", "RTMIN+x", "9x"] {
            let err = parse(text).unwrap_err().to_string();
            assert!(err.contains("signal"), "{text}: {err}");
        }
    }
}
