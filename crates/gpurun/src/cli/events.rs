//! runc's events flags.

use std::time::Duration;

#[derive(clap::Args, Debug)]
pub struct EventsArgs {
    /// How often to report stats: a duration such as 5s, 100ms or 1m
    #[arg(long, default_value = "5s", value_parser = parse_interval)]
    pub interval: Duration,
    /// Print one stats event and exit
    #[arg(long)]
    pub stats: bool,
    /// The container to watch
    #[arg(value_parser = clap::builder::NonEmptyStringValueParser::new())]
    pub container_id: String,
}

/// A Go duration ("1.5s", "100ms", "2m", "1h") or a number of seconds.
fn parse_interval(text: &str) -> Result<Duration, String> {
    let bad = || format!("{text:?}: give a duration such as 5s, 100ms or 1m");
    if let Ok(seconds) = text.parse::<f64>() {
        return (seconds > 0.0 && seconds.is_finite())
            .then(|| Duration::from_secs_f64(seconds))
            .ok_or_else(bad);
    }
    let split = text
        .find(|c: char| c.is_ascii_alphabetic())
        .ok_or_else(bad)?;
    let (number, unit) = text.split_at(split);
    let number: f64 = number.parse().map_err(|_| bad())?;
    let seconds = match unit {
        "ns" => number / 1e9,
        "us" | "µs" => number / 1e6,
        "ms" => number / 1e3,
        "s" => number,
        "m" => number * 60.0,
        "h" => number * 3600.0,
        _ => return Err(bad()),
    };
    (seconds > 0.0 && seconds.is_finite())
        .then(|| Duration::from_secs_f64(seconds))
        .ok_or_else(bad)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals_are_go_durations() {
        assert_eq!(parse_interval("5s"), Ok(Duration::from_secs(5)));
        assert_eq!(parse_interval("100ms"), Ok(Duration::from_millis(100)));
        assert_eq!(parse_interval("1m"), Ok(Duration::from_secs(60)));
        assert_eq!(parse_interval("2"), Ok(Duration::from_secs(2)));
        assert!(parse_interval("0s").is_err());
        assert!(parse_interval("5 parsecs").is_err());
        assert!(parse_interval("-1s").is_err());
    }
}
