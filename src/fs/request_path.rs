//! A request's path as a path under the served root: percent-decoded segment by segment,
//! and refused when it could name anything outside the root (a `..` segment, a decoded
//! `/` or `\`, a NUL). Symbolic links are checked later, against the disk.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

/// Why a path is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refused {
    /// A `%` not followed by two hex digits.
    BadEncoding,
    /// A segment that climbs (`..`) or hides a separator or a NUL.
    Traversal,
}

/// The path relative to the root, and whether the request's path ended in `/`.
pub(crate) fn relative(path: &str) -> Result<(PathBuf, bool), Refused> {
    let mut rel = PathBuf::new();
    for segment in path.split('/') {
        let decoded = decode(segment)?;
        match &decoded[..] {
            b"" | b"." => continue,
            b".." => return Err(Refused::Traversal),
            bytes if bytes.iter().any(|b| matches!(b, b'/' | b'\\' | 0)) => {
                return Err(Refused::Traversal)
            }
            bytes => rel.push(OsStr::from_bytes(bytes)),
        }
    }
    Ok((rel, path.ends_with('/')))
}

/// Percent-decodes one segment.
fn decode(segment: &str) -> Result<Vec<u8>, Refused> {
    let bytes = segment.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes.get(i + 1..i + 3).ok_or(Refused::BadEncoding)?;
            let hi = (hex[0] as char).to_digit(16).ok_or(Refused::BadEncoding)?;
            let lo = (hex[1] as char).to_digit(16).ok_or(Refused::BadEncoding)?;
            out.push((hi * 16 + lo) as u8);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(path: &str) -> (String, bool) {
        let (p, slash) = relative(path).unwrap();
        (p.to_str().unwrap().to_string(), slash)
    }

    #[test]
    fn plain_paths_and_encodings() {
        assert_eq!(ok("/"), ("".into(), true));
        assert_eq!(ok("/a/b.txt"), ("a/b.txt".into(), false));
        assert_eq!(ok("/docs/"), ("docs".into(), true));
        assert_eq!(ok("//a/./b"), ("a/b".into(), false));
        assert_eq!(ok("/with%20space"), ("with space".into(), false));
        assert_eq!(ok("/%E2%9C%93"), ("\u{2713}".into(), false));
        assert_eq!(ok("/..foo/foo.."), ("..foo/foo..".into(), false));
    }

    #[test]
    fn traversal_battery() {
        for bad in [
            "/..",
            "/../etc/passwd",
            "/a/../../etc/passwd",
            "/a/..",
            "/%2e%2e/etc/passwd",
            "/%2E%2E/etc/passwd",
            "/.%2e/x",
            "/a%2f..%2f..%2fetc",
            "/a%2F..",
            "/..%5c..%5cwindows",
            "/a%5cb",
            "/a%00.txt",
            "/x/%2e%2e",
        ] {
            assert_eq!(relative(bad), Err(Refused::Traversal), "{bad}");
        }
        for bad in ["/%", "/%2", "/%zz", "/a%g0"] {
            assert_eq!(relative(bad), Err(Refused::BadEncoding), "{bad}");
        }
    }
}
