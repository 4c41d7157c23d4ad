//! runc's update flags.

/// runc's `update` flags. Values that may be -1 (no limit) are signed.
#[derive(clap::Args, Debug)]
pub struct UpdateArgs {
    /// A file with LinuxResources JSON, or - for stdin
    #[arg(short, long)]
    pub resources: Option<std::path::PathBuf>,
    /// Relative block I/O weight (10-1000)
    #[arg(long)]
    pub blkio_weight: Option<u16>,
    /// CPU CFS period in microseconds
    #[arg(long)]
    pub cpu_period: Option<u64>,
    /// CPU CFS quota in microseconds (-1: no limit)
    #[arg(long, allow_hyphen_values = true)]
    pub cpu_quota: Option<i64>,
    /// CPU realtime period in microseconds
    #[arg(long)]
    pub cpu_rt_period: Option<u64>,
    /// CPU realtime runtime in microseconds (-1: no limit)
    #[arg(long, allow_hyphen_values = true)]
    pub cpu_rt_runtime: Option<i64>,
    /// CPU shares (relative weight)
    #[arg(long)]
    pub cpu_share: Option<u64>,
    /// CPUs the container may use (0-3, 0,1)
    #[arg(long)]
    pub cpuset_cpus: Option<String>,
    /// Memory nodes the container may use (0-3, 0,1)
    #[arg(long)]
    pub cpuset_mems: Option<String>,
    /// Memory limit in bytes, with an optional k, m or g (-1: no limit)
    #[arg(long, allow_hyphen_values = true, value_parser = parse_size)]
    pub memory: Option<i64>,
    /// Memory soft limit in bytes, with an optional k, m or g
    #[arg(long, allow_hyphen_values = true, value_parser = parse_size)]
    pub memory_reservation: Option<i64>,
    /// Memory plus swap limit in bytes, with an optional k, m or g (-1: no limit)
    #[arg(long, allow_hyphen_values = true, value_parser = parse_size)]
    pub memory_swap: Option<i64>,
    /// Most tasks the container may have (-1: no limit; 0: unchanged, as in runc)
    #[arg(long, allow_hyphen_values = true)]
    pub pids_limit: Option<i64>,
    /// Intel RDT/CAT L3 cache schema
    #[arg(long)]
    pub l3_cache_schema: Option<String>,
    /// Intel RDT/MBA memory bandwidth schema
    #[arg(long)]
    pub mem_bw_schema: Option<String>,
    /// The container whose limits change
    #[arg(value_parser = clap::builder::NonEmptyStringValueParser::new())]
    pub container_id: String,
}

/// "512", "64k", "100M", "2g" or "-1".
fn parse_size(text: &str) -> Result<i64, String> {
    if text == "-1" {
        return Ok(-1);
    }
    let lower = text.to_ascii_lowercase();
    let trimmed = lower.trim_end_matches('b');
    let (digits, unit) = match trimmed.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => (&trimmed[..i], c),
        _ => (trimmed, ' '),
    };
    let factor: i64 = match unit {
        ' ' => 1,
        'k' => 1 << 10,
        'm' => 1 << 20,
        'g' => 1 << 30,
        't' => 1 << 40,
        _ => {
            return Err(format!(
                "{text:?}: use bytes, or a number with k, m, g or t"
            ))
        }
    };
    digits
        .parse::<i64>()
        .ok()
        .and_then(|n| n.checked_mul(factor))
        .filter(|n| *n >= 0)
        .ok_or_else(|| format!("{text:?}: use bytes, or a number with k, m, g or t"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_as_runc_reads_them() {
        assert_eq!(parse_size("512"), Ok(512));
        assert_eq!(parse_size("64k"), Ok(64 << 10));
        assert_eq!(parse_size("100M"), Ok(100 << 20));
        assert_eq!(parse_size("2g"), Ok(2 << 30));
        assert_eq!(parse_size("-1"), Ok(-1));
        assert!(parse_size("-2").is_err());
        assert!(parse_size("12x").is_err());
    }
}
