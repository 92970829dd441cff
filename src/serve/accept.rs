//! What a request's `Accept-Encoding` accepts (RFC 9110 section 12.5.3), reduced to what
//! `serve` can answer with: a stored copy in zstd or gzip (`symdex_shared::encoded`), or the
//! raw bytes (`identity`).
//!
//! The rules kept here:
//! - No header: the raw bytes. The RFC lets a server pick any coding then, but clients that
//!   send none (samply's symsrv, curl without `--compressed`, SymSrv) expect the file as it is.
//! - Each coding's weight is its `q` (1 when not given, 0 to 1 with at most three decimals);
//!   `q=0` refuses it. Unknown codings (`br`, `deflate`) are ignored: no copy is kept in them.
//! - `*` gives its weight to every coding not named, `identity` included; `identity` is
//!   acceptable unless refused by `identity;q=0` or by `*;q=0` without `identity` named.
//! - The highest weight wins; at the same weight zstd before gzip before identity (a copy is
//!   a fifth of the bytes, and a client naming a coding decodes it).
//! - An element that does not parse (a bad `q`) is ignored, as an unknown coding is.
//!
//! When nothing acceptable exists (`identity;q=0` and no copy), the raw bytes are sent
//! anyway rather than 406: RFC 9110 section 12.1 allows it, and a debugger is better served by
//! bytes it may reject than by no answer.

use http::header::GetAll;
use http::HeaderValue;
use symdex_shared::encoded::Encoding;

/// A weight in thousandths: 0 (refused) to 1000.
type Weight = u16;

/// The weights a request gave the codings `serve` can answer with; `None`: not named.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct AcceptEncoding {
    zstd: Option<Weight>,
    gzip: Option<Weight>,
    identity: Option<Weight>,
    star: Option<Weight>,
    /// The header was sent at all.
    present: bool,
}

impl AcceptEncoding {
    /// The weights every `Accept-Encoding` line of a request gives (several lines are one
    /// list, RFC 9110 section 5.3); a line that is not visible ASCII is ignored.
    pub fn of(values: GetAll<'_, HeaderValue>) -> AcceptEncoding {
        let mut accepted = AcceptEncoding::default();
        for value in values {
            accepted.present = true;
            if let Ok(text) = value.to_str() {
                accepted.add(text);
            }
        }
        accepted
    }

    /// Parses one header line's elements into `self`.
    fn add(&mut self, text: &str) {
        for element in text.split(',') {
            let mut parts = element.split(';');
            let coding = parts.next().unwrap_or("").trim();
            if coding.is_empty() {
                continue;
            }
            let Some(weight) = weight_of(parts) else {
                continue;
            };
            let slot = match coding.to_ascii_lowercase().as_str() {
                "zstd" => &mut self.zstd,
                // RFC 9110 section 8.4.1.3: x-gzip is gzip.
                "gzip" | "x-gzip" => &mut self.gzip,
                "identity" => &mut self.identity,
                "*" => &mut self.star,
                _ => continue,
            };
            // Named twice: the higher weight (the RFC leaves it open; the generous reading).
            *slot = Some(slot.map_or(weight, |w| w.max(weight)));
        }
    }

    /// The weight of `coding`'s slot, `*` standing in for what was not named.
    fn weight(&self, named: Option<Weight>) -> Weight {
        named.or(self.star).unwrap_or(0)
    }

    fn identity_weight(&self) -> Weight {
        match (self.identity, self.star) {
            (Some(w), _) => w,
            (None, Some(0)) => 0,
            // Always acceptable unless refused; below any coding named at full weight.
            _ => 1,
        }
    }

    /// The copies to answer with, best first: the encodings the request accepts at a weight
    /// above the raw bytes' (or equal to it: a coding wins a tie). Empty: the raw bytes.
    pub fn ranked(&self) -> Vec<Encoding> {
        if !self.present {
            return Vec::new();
        }
        let identity = self.identity_weight();
        let mut ranked: Vec<(Weight, Encoding)> = Encoding::ALL
            .into_iter()
            .map(|encoding| {
                let named = match encoding {
                    Encoding::Zstd => self.zstd,
                    Encoding::Gzip => self.gzip,
                };
                (self.weight(named), encoding)
            })
            .filter(|&(weight, _)| weight > 0 && weight >= identity)
            .collect();
        // Stable: at the same weight Encoding::ALL's order (zstd first) stays.
        ranked.sort_by_key(|&(weight, _)| std::cmp::Reverse(weight));
        ranked.into_iter().map(|(_, encoding)| encoding).collect()
    }
}

/// The weight an element's parameters give (`q=0.5`); `None` for a `q` that is not a qvalue
/// (RFC 9110 section 12.4.2: `0[.ddd]` or `1[.000]`). Other parameters are ignored.
fn weight_of<'a>(parameters: impl Iterator<Item = &'a str>) -> Option<Weight> {
    let mut weight = 1000;
    for parameter in parameters {
        let Some((name, value)) = parameter.split_once('=') else {
            continue;
        };
        if name.trim().eq_ignore_ascii_case("q") {
            weight = qvalue(value.trim())?;
        }
    }
    Some(weight)
}

fn qvalue(text: &str) -> Option<Weight> {
    let (whole, fraction) = text.split_once('.').unwrap_or((text, ""));
    if fraction.len() > 3 || !fraction.bytes().all(|d| d.is_ascii_digit()) {
        return None;
    }
    // "5" is 500 thousandths, "05" 50, "005" 5.
    let thousandths = fraction
        .bytes()
        .chain(std::iter::repeat(b'0'))
        .take(3)
        .fold(0, |n, d| n * 10 + Weight::from(d - b'0'));
    match whole {
        "0" => Some(thousandths),
        "1" if thousandths == 0 => Some(1000),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::{AcceptEncoding, Encoding, HeaderValue};
    use http::header::ACCEPT_ENCODING;
    use http::HeaderMap;

    fn ranked(lines: &[&str]) -> Vec<Encoding> {
        let mut headers = HeaderMap::new();
        for line in lines {
            headers.append(ACCEPT_ENCODING, HeaderValue::from_str(line).unwrap());
        }
        AcceptEncoding::of(headers.get_all(ACCEPT_ENCODING)).ranked()
    }

    use Encoding::{Gzip, Zstd};

    #[test]
    fn no_header_or_nothing_known_is_the_raw_bytes() {
        assert_eq!(ranked(&[]), vec![]);
        assert_eq!(ranked(&[""]), vec![]);
        assert_eq!(ranked(&["identity"]), vec![]);
        assert_eq!(ranked(&["br"]), vec![]);
        assert_eq!(ranked(&["br, deflate"]), vec![]);
    }

    #[test]
    fn zstd_wins_a_tie_and_the_highest_weight_wins_otherwise() {
        assert_eq!(ranked(&["gzip, zstd"]), vec![Zstd, Gzip]);
        assert_eq!(ranked(&["zstd, gzip"]), vec![Zstd, Gzip]);
        // What elfutils' libdebuginfod and LLDB send.
        assert_eq!(ranked(&["deflate, gzip, br, zstd"]), vec![Zstd, Gzip]);
        assert_eq!(ranked(&["gzip;q=1, zstd;q=0.5"]), vec![Gzip, Zstd]);
        assert_eq!(ranked(&["zstd;q=0.9", "gzip;q=0.8"]), vec![Zstd, Gzip]);
        assert_eq!(ranked(&["gzip"]), vec![Gzip]);
        assert_eq!(ranked(&["x-gzip"]), vec![Gzip]);
        assert_eq!(ranked(&["ZSTD"]), vec![Zstd]);
    }

    #[test]
    fn q_zero_refuses() {
        assert_eq!(ranked(&["zstd;q=0, gzip"]), vec![Gzip]);
        assert_eq!(ranked(&["zstd ; Q=0.000 , gzip"]), vec![Gzip]);
        assert_eq!(ranked(&["*;q=0"]), vec![]);
        assert_eq!(ranked(&["*, zstd;q=0"]), vec![Gzip]);
    }

    #[test]
    fn star_stands_for_what_is_not_named() {
        assert_eq!(ranked(&["*"]), vec![Zstd, Gzip]);
        assert_eq!(ranked(&["gzip;q=0.5, *;q=0.8"]), vec![Zstd, Gzip]);
        // identity named at a higher weight than `*` gives the codings: the raw bytes.
        assert_eq!(ranked(&["*;q=0.5, identity"]), vec![]);
    }

    #[test]
    fn identity_above_a_coding_keeps_the_raw_bytes() {
        assert_eq!(ranked(&["zstd;q=0.5, identity"]), vec![]);
        assert_eq!(ranked(&["zstd;q=0.5, identity;q=0.5"]), vec![Zstd]);
        assert_eq!(ranked(&["zstd;q=0.1, identity;q=0"]), vec![Zstd]);
        assert_eq!(ranked(&["identity;q=0, gzip;q=0.2"]), vec![Gzip]);
    }

    #[test]
    fn elements_that_do_not_parse_are_ignored() {
        assert_eq!(ranked(&["zstd;q=2, gzip"]), vec![Gzip]);
        assert_eq!(ranked(&["zstd;q=0.1234"]), vec![]);
        assert_eq!(ranked(&["zstd;q=abc"]), vec![]);
        assert_eq!(ranked(&["zstd;q=1.5"]), vec![]);
        assert_eq!(ranked(&["zstd;q=-1"]), vec![]);
        assert_eq!(ranked(&[",,zstd;level=3,"]), vec![Zstd]);
        assert_eq!(ranked(&["zstd;q=1.000"]), vec![Zstd]);
        assert_eq!(ranked(&["zstd;q=0."]), vec![]);
    }
}
