//! Retention by channel: how long an upload stays published.
//!
//! An upload's channel comes from its metadata (`channel`); a policy maps channels to a
//! retention (`try=28d,nightly=90d,release=forever`). The expiry is stamped on the upload when
//! it is first indexed (upload record and manifest record), changed only by a promotion, and
//! acted on by `expire` (the CLI) or the sweeper (the Lambda), which remove expired uploads
//! through the reference-counted delete: a key still referenced by a live upload stays.
//!
//! An upload without a channel, or with a channel the policy does not name, never expires:
//! forgetting to configure a channel must never unpublish symbols.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;
use std::time::{Duration, SystemTime};

use crate::upload_meta::UploadMeta;

/// The policy when none is configured.
pub const DEFAULT_POLICY: &str = "try=28d,nightly=90d,release=forever";

/// The channel a promotion moves uploads to when none is given.
pub const RELEASE_CHANNEL: &str = "release";

/// How long one channel's uploads stay.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retention {
    Forever,
    For(Duration),
}

impl fmt::Display for Retention {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Retention::Forever => f.write_str("forever"),
            Retention::For(d) => {
                let secs = d.as_secs();
                if secs % 86_400 == 0 {
                    write!(f, "{}d", secs / 86_400)
                } else if secs % 3_600 == 0 {
                    write!(f, "{}h", secs / 3_600)
                } else {
                    write!(f, "{secs}s")
                }
            }
        }
    }
}

impl FromStr for Retention {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let s = s.trim();
        if s.eq_ignore_ascii_case("forever") || s == "0" {
            return Ok(Retention::Forever);
        }
        let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
        let (number, unit) = s.split_at(split);
        let number: u64 = number
            .parse()
            .map_err(|_| format!("retention {s:?}: expected a number and a unit (28d)"))?;
        let unit_secs: u64 = match unit {
            "s" => 1,
            "m" => 60,
            "h" => 3_600,
            "d" => 86_400,
            "w" => 7 * 86_400,
            "y" => 365 * 86_400,
            _ => return Err(format!("retention {s:?}: unit must be s, m, h, d, w or y")),
        };
        // At most a thousand years: beyond that "forever" says it better, and the product
        // stays far from overflowing a SystemTime.
        let secs = number
            .checked_mul(unit_secs)
            .filter(|&secs| secs <= 1000 * 365 * 86_400)
            .ok_or_else(|| format!("retention {s:?} is too long (say forever)"))?;
        Ok(Retention::For(Duration::from_secs(secs)))
    }
}

/// Channel -> retention.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetentionPolicy {
    channels: BTreeMap<String, Retention>,
}

impl Default for RetentionPolicy {
    fn default() -> Self {
        // The constant parses (tested below); an empty policy would keep everything forever.
        DEFAULT_POLICY.parse().unwrap_or(RetentionPolicy {
            channels: BTreeMap::new(),
        })
    }
}

impl FromStr for RetentionPolicy {
    type Err = String;

    /// `channel=retention,...`; an empty string is a policy that keeps everything.
    fn from_str(s: &str) -> Result<Self, String> {
        let mut channels = BTreeMap::new();
        for entry in s.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            let (channel, retention) = entry
                .split_once('=')
                .ok_or_else(|| format!("policy entry {entry:?}: expected CHANNEL=RETENTION"))?;
            let channel = channel.trim();
            check_channel(channel)?;
            channels.insert(channel.to_ascii_lowercase(), retention.parse()?);
        }
        Ok(RetentionPolicy { channels })
    }
}

impl fmt::Display for RetentionPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let entries: Vec<String> = self
            .channels
            .iter()
            .map(|(channel, retention)| format!("{channel}={retention}"))
            .collect();
        f.write_str(&entries.join(","))
    }
}

impl RetentionPolicy {
    /// The retention of a channel (case-insensitive); no channel or an unnamed one: forever.
    pub fn retention(&self, channel: Option<&str>) -> Retention {
        channel
            .and_then(|c| self.channels.get(&c.to_ascii_lowercase()))
            .copied()
            .unwrap_or(Retention::Forever)
    }

    /// When an upload of `channel` made at `from` expires (`None`: never).
    pub fn expiry(&self, channel: Option<&str>, from: SystemTime) -> Option<SystemTime> {
        match self.retention(channel) {
            Retention::Forever => None,
            Retention::For(d) => from.checked_add(d),
        }
    }

    /// `meta` with the expiry of its channel, counted from `from` (RFC 3339).
    pub fn stamp(&self, meta: &UploadMeta, from: &str) -> UploadMeta {
        let from = parse_time(from).unwrap_or_else(|_| SystemTime::now());
        UploadMeta {
            expires: self.expiry(meta.channel.as_deref(), from).map(format_time),
            ..meta.clone()
        }
    }
}

/// Channel names come from upload metadata and key segments (untrusted): short, plain words.
pub fn check_channel(channel: &str) -> Result<(), String> {
    let ok = !channel.is_empty()
        && channel.len() <= 64
        && channel
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "channel {:?} is not a name of letters, digits, '-', '_' or '.' (at most 64)",
            channel.chars().take(80).collect::<String>()
        ))
    }
}

/// Parses RFC 3339 (`2026-11-23T10:00:00Z`; a bare date means its midnight, UTC).
pub fn parse_time(s: &str) -> Result<SystemTime, String> {
    let s = s.trim();
    let full = if s.len() == 10 {
        format!("{s}T00:00:00Z")
    } else {
        s.to_string()
    };
    humantime::parse_rfc3339_weak(full.trim_end_matches('Z'))
        .map_err(|e| format!("time {s:?}: {e} (expected RFC 3339, e.g. 2026-11-23T10:00:00Z)"))
}

/// RFC 3339, seconds, UTC.
pub fn format_time(t: SystemTime) -> String {
    humantime::format_rfc3339_seconds(t).to_string()
}

/// Whether an upload with this metadata has expired at `now` (under `policy` counted from
/// `indexed_at` when one is given, else by its recorded expiry).
pub fn is_expired(
    meta: &UploadMeta,
    indexed_at: &str,
    now: SystemTime,
    policy: Option<&RetentionPolicy>,
) -> bool {
    let expires = match policy {
        Some(policy) => match parse_time(indexed_at) {
            Ok(from) => policy.expiry(meta.channel.as_deref(), from),
            // An unreadable time never expires anything.
            Err(_) => None,
        },
        None => meta.expires.as_deref().and_then(|e| parse_time(e).ok()),
    };
    expires.is_some_and(|expires| expires <= now)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::{check_channel, is_expired, parse_time, Retention, RetentionPolicy};
    use crate::upload_meta::UploadMeta;

    #[test]
    fn default_policy_parses_and_prints() {
        let policy = RetentionPolicy::default();
        assert_eq!(policy.to_string(), "nightly=90d,release=forever,try=28d");
        assert_eq!(
            policy.retention(Some("TRY")),
            Retention::For(Duration::from_secs(28 * 86_400))
        );
        assert_eq!(policy.retention(Some("release")), Retention::Forever);
        assert_eq!(policy.retention(Some("unknown")), Retention::Forever);
        assert_eq!(policy.retention(None), Retention::Forever);
    }

    #[test]
    fn bad_policies_are_errors() {
        for bad in [
            "try",
            "try=28",
            "try=28q",
            "try=-1d",
            "../x=1d",
            "try=99999999999999999d",
        ] {
            assert!(bad.parse::<RetentionPolicy>().is_err(), "{bad}");
        }
        assert_eq!("".parse::<RetentionPolicy>().unwrap().to_string(), "");
        assert_eq!(
            "pr=12h, ci = 2w"
                .parse::<RetentionPolicy>()
                .unwrap()
                .to_string(),
            "ci=14d,pr=12h"
        );
    }

    #[test]
    fn expiry_from_the_recorded_stamp_or_a_policy() {
        let policy: RetentionPolicy = "try=28d".parse().unwrap();
        let meta = UploadMeta {
            channel: Some("try".into()),
            ..UploadMeta::default()
        };
        let stamped = policy.stamp(&meta, "2026-01-01T00:00:00Z");
        assert_eq!(stamped.expires.as_deref(), Some("2026-01-29T00:00:00Z"));
        let at = |s| parse_time(s).unwrap();
        let indexed = "2026-01-01T00:00:00Z";
        assert!(!is_expired(
            &stamped,
            indexed,
            at("2026-01-28T23:59:59Z"),
            None
        ));
        assert!(is_expired(&stamped, indexed, at("2026-01-29"), None));
        // Another policy recomputes from the channel and the upload's time.
        let longer: RetentionPolicy = "try=60d".parse().unwrap();
        assert!(!is_expired(
            &stamped,
            indexed,
            at("2026-02-01"),
            Some(&longer)
        ));
        // No channel: never.
        let plain = policy.stamp(&UploadMeta::default(), indexed);
        assert_eq!(plain.expires, None);
        assert!(!is_expired(
            &plain,
            indexed,
            at("2999-01-01"),
            Some(&policy)
        ));
    }

    #[test]
    fn channel_names_are_checked() {
        assert!(check_channel("nightly-2").is_ok());
        for bad in ["", "a/b", "x\u{0}", "tr y", &"c".repeat(65)] {
            assert!(check_channel(bad).is_err(), "{bad:?}");
        }
    }
}
