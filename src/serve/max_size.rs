//! `X-DEBUGINFOD-MAXSIZE`: the largest file a debuginfod client wants (elfutils'
//! `DEBUGINFOD_MAXSIZE`). elfutils' server answers a larger file with 406, and so does
//! `serve`: the raw file's size is compared (`raw_size.rs`), whatever coding would carry it,
//! since the limit is the client's disk and memory, not the wire. A value that is not a
//! positive whole number of bytes sets no limit, as zero or a negative one sets none in
//! elfutils' server (which reads `12abc` as 12 with `atol`; libdebuginfod sends digits only).

use http::HeaderMap;

/// The header's name, as libdebuginfod spells it (header names match case-insensitively).
const MAX_SIZE_HEADER: &str = "x-debuginfod-maxsize";

/// The limit a request sets, in bytes; `None` for none.
pub fn max_size(headers: &HeaderMap) -> Option<u64> {
    let text = headers.get(MAX_SIZE_HEADER)?.to_str().ok()?;
    text.trim().parse::<u64>().ok().filter(|&limit| limit > 0)
}

#[cfg(test)]
mod tests {
    use super::{max_size, HeaderMap, MAX_SIZE_HEADER};
    use http::HeaderValue;

    fn limit(value: &str) -> Option<u64> {
        let mut headers = HeaderMap::new();
        headers.insert(MAX_SIZE_HEADER, HeaderValue::from_str(value).unwrap());
        max_size(&headers)
    }

    #[test]
    fn a_positive_number_is_a_limit_and_anything_else_none() {
        assert_eq!(max_size(&HeaderMap::new()), None);
        assert_eq!(limit("100"), Some(100));
        assert_eq!(limit(" 4096 "), Some(4096));
        for ignored in [
            "",
            "0",
            "-5",
            "abc",
            "1e6",
            "12 MB",
            "99999999999999999999999",
        ] {
            assert_eq!(limit(ignored), None, "{ignored:?}");
        }
    }
}
