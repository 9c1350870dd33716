//! Conditional and range requests on one representation (RFC 9110 §13 and §14): the
//! preconditions in the RFC's order, then a single byte range (a multi-range request
//! gets the whole representation, which §14.2 allows).

use http::header::{
    HeaderMap, IF_MATCH, IF_MODIFIED_SINCE, IF_NONE_MATCH, IF_RANGE, IF_UNMODIFIED_SINCE, RANGE,
};
use std::time::SystemTime;

/// What a representation is known by: its strong entity tag (quoted) and its
/// modification time (whole seconds, as `Last-Modified` says it).
#[derive(Debug, Clone)]
pub(crate) struct Validators {
    pub etag: String,
    pub modified: SystemTime,
}

/// What to answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Answer {
    /// 200: the whole representation.
    Whole,
    /// 206: `len` bytes from `start`.
    Part { start: u64, len: u64 },
    /// 304.
    NotModified,
    /// 412.
    PreconditionFailed,
    /// 416, with `Content-Range: bytes */len`.
    RangeNotSatisfiable,
}

/// Evaluates the request's conditions against a representation of `len` bytes. `ranged`
/// is false for a method Range does not apply to (HEAD).
pub(crate) fn evaluate(headers: &HeaderMap, v: &Validators, len: u64, ranged: bool) -> Answer {
    // Most requests carry none of them: one pass over the fields beats six lookups by hash.
    let conditional = [
        IF_MATCH,
        IF_UNMODIFIED_SINCE,
        IF_NONE_MATCH,
        IF_MODIFIED_SINCE,
        RANGE,
        IF_RANGE,
    ];
    if !headers.keys().any(|k| conditional.contains(k)) {
        return Answer::Whole;
    }
    // §13.2.2: If-Match, else If-Unmodified-Since; then If-None-Match, else
    // If-Modified-Since; then If-Range with Range.
    if let Some(m) = header(headers, IF_MATCH) {
        if !matches_any(m, &v.etag, false) {
            return Answer::PreconditionFailed;
        }
    } else if let Some(t) = date(headers, IF_UNMODIFIED_SINCE) {
        if v.modified > t {
            return Answer::PreconditionFailed;
        }
    }
    if let Some(m) = header(headers, IF_NONE_MATCH) {
        if matches_any(m, &v.etag, true) {
            return Answer::NotModified;
        }
    } else if let Some(t) = date(headers, IF_MODIFIED_SINCE) {
        if v.modified <= t {
            return Answer::NotModified;
        }
    }
    let Some(range) = header(headers, RANGE).filter(|_| ranged) else {
        return Answer::Whole;
    };
    if let Some(cond) = header(headers, IF_RANGE) {
        // A strong tag that matches, or exactly the Last-Modified date; else the whole.
        let fresh = if cond.starts_with('"') {
            cond == v.etag
        } else {
            httpdate::parse_http_date(cond).is_ok_and(|t| t == v.modified)
        };
        if !fresh {
            return Answer::Whole;
        }
    }
    byte_range(range, len)
}

/// One `bytes=` range against `len` bytes.
fn byte_range(range: &str, len: u64) -> Answer {
    let Some(spec) = range.trim().strip_prefix("bytes=") else {
        return Answer::Whole; // another unit: ignored (§14.2)
    };
    if spec.contains(',') {
        return Answer::Whole;
    }
    let Some((first, last)) = spec.trim().split_once('-') else {
        return Answer::Whole;
    };
    let number = |s: &str| -> Option<u64> {
        let s = s.trim();
        (!s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
            .then(|| s.parse().ok())
            .flatten()
    };
    match (first.trim().is_empty(), number(first), number(last)) {
        // bytes=-N: the last N bytes.
        (true, _, Some(n)) => {
            if n == 0 || len == 0 {
                return Answer::RangeNotSatisfiable;
            }
            let n = n.min(len);
            Answer::Part {
                start: len - n,
                len: n,
            }
        }
        (false, Some(start), end) if last.trim().is_empty() || end.is_some() => {
            if start >= len {
                return Answer::RangeNotSatisfiable;
            }
            let end = end.map_or(len - 1, |e| e.min(len - 1));
            if end < start {
                return Answer::Whole; // invalid (§14.1.1): ignored
            }
            Answer::Part {
                start,
                len: end - start + 1,
            }
        }
        _ => Answer::Whole,
    }
}

fn header(headers: &HeaderMap, name: http::header::HeaderName) -> Option<&str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

fn date(headers: &HeaderMap, name: http::header::HeaderName) -> Option<SystemTime> {
    header(headers, name).and_then(|s| httpdate::parse_http_date(s).ok())
}

/// Whether a list of entity tags (or `*`) names ours: weakly for If-None-Match, strongly
/// for If-Match (§8.8.3.2).
fn matches_any(list: &str, ours: &str, weak: bool) -> bool {
    if list.trim() == "*" {
        return true;
    }
    list.split(',').map(str::trim).any(|tag| {
        let tag = if weak {
            tag.strip_prefix("W/").unwrap_or(tag)
        } else {
            tag
        };
        tag == ours
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    fn v() -> Validators {
        Validators {
            etag: "\"abc\"".into(),
            modified: UNIX_EPOCH + Duration::from_secs(1_700_000_000),
        }
    }

    fn eval(pairs: &[(&str, &str)], ranged: bool) -> Answer {
        let mut h = HeaderMap::new();
        for (k, val) in pairs {
            h.append(
                http::header::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                val.parse().unwrap(),
            );
        }
        evaluate(&h, &v(), 1000, ranged)
    }

    const THEN: &str = "Tue, 14 Nov 2023 22:13:20 GMT"; // 1_700_000_000
    const BEFORE: &str = "Tue, 14 Nov 2023 22:13:19 GMT";

    #[test]
    fn preconditions_in_order() {
        assert_eq!(eval(&[], true), Answer::Whole);
        assert_eq!(
            eval(&[("if-none-match", "\"abc\"")], true),
            Answer::NotModified
        );
        assert_eq!(
            eval(&[("if-none-match", "W/\"abc\"")], true),
            Answer::NotModified
        );
        assert_eq!(
            eval(&[("if-none-match", "\"x\", \"abc\"")], true),
            Answer::NotModified
        );
        assert_eq!(eval(&[("if-none-match", "*")], true), Answer::NotModified);
        assert_eq!(eval(&[("if-none-match", "\"x\"")], true), Answer::Whole);
        assert_eq!(
            eval(&[("if-modified-since", THEN)], true),
            Answer::NotModified
        );
        assert_eq!(eval(&[("if-modified-since", BEFORE)], true), Answer::Whole);
        // If-None-Match wins over If-Modified-Since.
        let both = [("if-none-match", "\"x\""), ("if-modified-since", THEN)];
        assert_eq!(eval(&both, true), Answer::Whole);
        assert_eq!(
            eval(&[("if-match", "\"x\"")], true),
            Answer::PreconditionFailed
        );
        assert_eq!(
            eval(&[("if-match", "W/\"abc\"")], true),
            Answer::PreconditionFailed
        );
        assert_eq!(eval(&[("if-match", "\"abc\"")], true), Answer::Whole);
        let ius = [("if-unmodified-since", BEFORE)];
        assert_eq!(eval(&ius, true), Answer::PreconditionFailed);
    }

    #[test]
    fn ranges() {
        let part = |start, len| Answer::Part { start, len };
        assert_eq!(eval(&[("range", "bytes=0-99")], true), part(0, 100));
        assert_eq!(eval(&[("range", "bytes=900-")], true), part(900, 100));
        assert_eq!(eval(&[("range", "bytes=900-5000")], true), part(900, 100));
        assert_eq!(eval(&[("range", "bytes=-10")], true), part(990, 10));
        assert_eq!(eval(&[("range", "bytes=-5000")], true), part(0, 1000));
        assert_eq!(eval(&[("range", "bytes=999-999")], true), part(999, 1));
        let unsat = Answer::RangeNotSatisfiable;
        assert_eq!(eval(&[("range", "bytes=1000-")], true), unsat);
        assert_eq!(eval(&[("range", "bytes=-0")], true), unsat);
        // Ignored: HEAD, other units, several ranges, nonsense, end before start.
        assert_eq!(eval(&[("range", "bytes=0-9")], false), Answer::Whole);
        assert_eq!(eval(&[("range", "items=0-9")], true), Answer::Whole);
        assert_eq!(eval(&[("range", "bytes=0-1,5-6")], true), Answer::Whole);
        assert_eq!(eval(&[("range", "bytes=a-b")], true), Answer::Whole);
        assert_eq!(eval(&[("range", "bytes=9-3")], true), Answer::Whole);
        assert_eq!(eval(&[("range", "bytes=+1-3")], true), Answer::Whole);
        // If-Range: a matching tag or date keeps the range, anything else drops it.
        let r = ("range", "bytes=0-9");
        assert_eq!(eval(&[r, ("if-range", "\"abc\"")], true), part(0, 10));
        assert_eq!(eval(&[r, ("if-range", "\"old\"")], true), Answer::Whole);
        assert_eq!(eval(&[r, ("if-range", THEN)], true), part(0, 10));
        assert_eq!(eval(&[r, ("if-range", BEFORE)], true), Answer::Whole);
    }
}
