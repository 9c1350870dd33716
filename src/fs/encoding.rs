//! Which precompressed twin an `Accept-Encoding` takes (RFC 9110 §12.5.3): `br` or `gzip`
//! by their q-values (`*` stands for an unnamed one; `q=0` refuses), `br` on a tie.

use http::header::{HeaderMap, ACCEPT_ENCODING};

/// A precompressed twin: the file with `.br` or `.gz` appended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Twin {
    Br,
    Gzip,
}

impl Twin {
    /// The twins, in the order preferred on a tie.
    pub(crate) const ALL: [Twin; 2] = [Twin::Br, Twin::Gzip];

    pub(crate) fn suffix(self) -> &'static str {
        match self {
            Twin::Br => "br",
            Twin::Gzip => "gz",
        }
    }

    /// Its `Content-Encoding`.
    pub(crate) fn coding(self) -> &'static str {
        match self {
            Twin::Br => "br",
            Twin::Gzip => "gzip",
        }
    }
}

/// The twins the request accepts, most wanted first (those with q=0 left out), in
/// thousandths of q.
pub(crate) fn accepted(headers: &HeaderMap) -> Vec<Twin> {
    let (mut br, mut gzip, mut star) = (None, None, None);
    for value in headers.get_all(ACCEPT_ENCODING) {
        let Ok(value) = value.to_str() else { continue };
        for item in value.split(',') {
            let mut parts = item.split(';');
            let coding = parts.next().unwrap_or("").trim();
            let q = parts
                .filter_map(|p| p.trim().strip_prefix("q=").or(p.trim().strip_prefix("Q=")))
                .next()
                .map_or(1000, qvalue);
            if coding.eq_ignore_ascii_case("br") {
                br = Some(q);
            } else if coding.eq_ignore_ascii_case("gzip") || coding.eq_ignore_ascii_case("x-gzip") {
                gzip = Some(q);
            } else if coding == "*" {
                star = Some(q);
            }
        }
    }
    let br = br.or(star).unwrap_or(0);
    let gzip = gzip.or(star).unwrap_or(0);
    let mut twins: Vec<(u32, Twin)> = [(br, Twin::Br), (gzip, Twin::Gzip)]
        .into_iter()
        .filter(|(q, _)| *q > 0)
        .collect();
    // Stable: br stays first on a tie.
    twins.sort_by_key(|t| std::cmp::Reverse(t.0));
    twins.into_iter().map(|(_, t)| t).collect()
}

/// A q-value in thousandths; anything malformed counts as 0 (not acceptable).
fn qvalue(s: &str) -> u32 {
    let s = s.trim();
    let (int, frac) = s.split_once('.').unwrap_or((s, ""));
    let whole = match int {
        "0" => 0,
        "1" => 1000,
        _ => return 0,
    };
    if frac.len() > 3 || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return 0;
    }
    let digits = format!("{frac:0<3}");
    (whole + digits.parse::<u32>().unwrap_or(0)).min(1000)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(v: &str) -> Vec<Twin> {
        let mut h = HeaderMap::new();
        h.insert(ACCEPT_ENCODING, v.parse().unwrap());
        accepted(&h)
    }

    #[test]
    fn q_values_choose() {
        assert_eq!(accepted(&HeaderMap::new()), vec![]);
        assert_eq!(with("gzip, deflate, br"), vec![Twin::Br, Twin::Gzip]);
        assert_eq!(with("gzip"), vec![Twin::Gzip]);
        assert_eq!(with("br;q=0.5, gzip"), vec![Twin::Gzip, Twin::Br]);
        assert_eq!(with("br;q=0, gzip;q=0.1"), vec![Twin::Gzip]);
        assert_eq!(with("*"), vec![Twin::Br, Twin::Gzip]);
        assert_eq!(with("*;q=0.2, gzip;q=0"), vec![Twin::Br]);
        assert_eq!(with("identity"), vec![]);
        assert_eq!(with("gzip;q=bogus"), vec![]);
        assert_eq!(with("GZIP;Q=1.000"), vec![Twin::Gzip]);
    }
}
