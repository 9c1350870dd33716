//! The fields a gateway removes (hop-by-hop, RFC 9110 §7.6.1) and adds (`Forwarded`,
//! `X-Forwarded-*`, `Via`) on the way through.

use super::config::Config;
use crate::proto::h1::encode::decimal;
use bytes::Bytes;
use http::header::{self, Entry, HeaderMap, HeaderName, HeaderValue};
use http::Version;
use std::cell::RefCell;
use std::fmt::{self, Write};
use std::net::IpAddr;

/// The fields RFC 9110 §7.6.1 makes hop-by-hop, with `Keep-Alive` and `Proxy-Connection`,
/// which older peers send without naming them in `Connection`.
const HOP_BY_HOP: [HeaderName; 9] = [
    header::CONNECTION,
    HeaderName::from_static("keep-alive"),
    HeaderName::from_static("proxy-connection"),
    header::PROXY_AUTHORIZATION,
    header::PROXY_AUTHENTICATE,
    header::TE,
    header::TRAILER,
    header::TRANSFER_ENCODING,
    header::UPGRADE,
];

/// Removes the fields that belong to one hop: `Connection` and every field it names, and
/// [`HOP_BY_HOP`].
pub(crate) fn strip_hop_by_hop(headers: &mut HeaderMap) {
    // Most requests carry none: one pass over the fields beats nine removals by hash.
    if !headers.keys().any(|k| HOP_BY_HOP.contains(k)) {
        return;
    }
    let named: Vec<HeaderName> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|name| HeaderName::from_bytes(name.trim().as_bytes()).ok())
        .collect();
    for name in named {
        headers.remove(name);
    }
    for name in HOP_BY_HOP {
        headers.remove(name);
    }
}

/// Whether the client's `TE` says it takes trailers (RFC 9110 §10.1.4).
pub(super) fn accepts_trailers(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::TE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|t| t.trim().eq_ignore_ascii_case("trailers"))
}

/// Where a request came from, as the forwarding fields tell it.
pub(super) struct Origin {
    /// The client's address, when the server said it.
    pub client: Option<IpAddr>,
    /// `http` or `https`.
    pub proto: &'static str,
    /// The host the client asked for.
    pub host: Option<HeaderValue>,
    /// The protocol the request came in (for `Via`).
    pub version: Version,
}

const X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");
const X_FORWARDED_PROTO: HeaderName = HeaderName::from_static("x-forwarded-proto");

/// Adds the forwarding fields `config` asks for to a request going upstream.
pub(super) fn add_forwarding(headers: &mut HeaderMap, config: &Config, origin: &Origin) {
    // Room for the four at once: the map grows once, not field by field.
    headers.reserve(4);
    if config.forwarded {
        if let Some(v) = forwarded(origin) {
            append_to_list(headers, header::FORWARDED, v);
        }
    }
    if config.x_forwarded_for {
        if let Some(v) = x_forwarded_for(origin.client) {
            append_to_list(headers, X_FORWARDED_FOR, v);
        }
    }
    if config.x_forwarded_proto {
        headers.insert(X_FORWARDED_PROTO, HeaderValue::from_static(origin.proto));
    }
    if config.via {
        add_via(headers, origin.version);
    }
}

// A keep-alive connection's requests come to the same worker one after another, so the
// last client's forwarding values are kept per thread: its next request takes them without
// formatting or allocating (the values share their bytes).
thread_local! {
    /// The last `Forwarded` element made here, and what it was made of (the `Host` as a
    /// copy: a field of the request would keep its whole head alive).
    static LAST_FORWARDED: RefCell<Option<LastForwarded>> = const { RefCell::new(None) };
    /// The last `X-Forwarded-For` address made here, and for which client.
    static LAST_X_FORWARDED_FOR: RefCell<Option<(Option<IpAddr>, HeaderValue)>> =
        const { RefCell::new(None) };
}

struct LastForwarded {
    client: Option<IpAddr>,
    proto: &'static str,
    host: Option<Box<[u8]>>,
    value: HeaderValue,
}

/// This hop's `Forwarded` element for `origin` (`None`: not a valid field value).
fn forwarded(origin: &Origin) -> Option<HeaderValue> {
    let host = origin.host.as_ref().map(HeaderValue::as_bytes);
    let kept = LAST_FORWARDED.try_with(|last| {
        let last = last.try_borrow().ok()?;
        let last = last.as_ref()?;
        let same = last.client == origin.client
            && last.proto == origin.proto
            && last.host.as_deref() == host;
        same.then(|| last.value.clone())
    });
    if let Ok(Some(value)) = kept {
        return Some(value);
    }
    let value = HeaderValue::from_maybe_shared(value_of(|w| forwarded_element(origin, w))).ok()?;
    let _ = LAST_FORWARDED.try_with(|last| {
        if let Ok(mut last) = last.try_borrow_mut() {
            *last = Some(LastForwarded {
                client: origin.client,
                proto: origin.proto,
                host: host.map(Box::from),
                value: value.clone(),
            });
        }
    });
    Some(value)
}

/// The client's address as `X-Forwarded-For` gives it (`unknown` when the server did not
/// say it).
fn x_forwarded_for(client: Option<IpAddr>) -> Option<HeaderValue> {
    let kept = LAST_X_FORWARDED_FOR.try_with(|last| {
        let last = last.try_borrow().ok()?;
        let (ip, value) = last.as_ref()?;
        (*ip == client).then(|| value.clone())
    });
    if let Ok(Some(value)) = kept {
        return Some(value);
    }
    let value = HeaderValue::from_maybe_shared(value_of(|w| match client {
        Some(IpAddr::V4(ip)) => write_ipv4(ip, w),
        Some(ip) => write!(w, "{ip}"),
        None => w.write_str("unknown"),
    }))
    .ok()?;
    let _ = LAST_X_FORWARDED_FOR.try_with(|last| {
        if let Ok(mut last) = last.try_borrow_mut() {
            *last = Some((client, value.clone()));
        }
    });
    Some(value)
}

/// Appends this hop to `Via` (RFC 9110 §7.6.3): the protocol it was received in, and who.
pub(super) fn add_via(headers: &mut HeaderMap, received: Version) {
    let v = match received {
        Version::HTTP_09 => "0.9 fibr",
        Version::HTTP_10 => "1.0 fibr",
        Version::HTTP_2 => "2 fibr",
        Version::HTTP_3 => "3 fibr",
        _ => "1.1 fibr",
    };
    append_to_list(headers, header::VIA, HeaderValue::from_static(v));
}

/// `existing, value` as one field line: some upstreams read only the first line of a list.
/// A value that is no valid field value is left out.
fn append_to_list(headers: &mut HeaderMap, name: HeaderName, value: HeaderValue) {
    // One lookup: most requests carry no such field yet.
    match headers.entry(name) {
        Entry::Vacant(e) => {
            e.insert(value);
        }
        Entry::Occupied(mut e) => {
            let mut joined = Vec::new();
            for v in e.iter() {
                joined.extend_from_slice(v.as_bytes());
                joined.extend_from_slice(b", ");
            }
            joined.extend_from_slice(value.as_bytes());
            if let Ok(v) = HeaderValue::from_maybe_shared(Bytes::from(joined)) {
                // Replaces every line the field had with the one.
                e.insert(v);
            }
        }
    }
}

/// An IPv4 address in dotted decimal, without the formatting machinery (four integer
/// formats cost more than the rest of the field).
fn write_ipv4(ip: std::net::Ipv4Addr, w: &mut dyn Write) -> fmt::Result {
    let mut buf = [0; 20];
    for (i, octet) in ip.octets().into_iter().enumerate() {
        if i > 0 {
            w.write_char('.')?;
        }
        // ASCII digits.
        let digits = decimal(octet.into(), &mut buf);
        w.write_str(std::str::from_utf8(digits).map_err(|_| fmt::Error)?)?;
    }
    Ok(())
}

/// This hop's `Forwarded` element (RFC 7239 §4): `for`, `proto`, `host`; an IPv6 address
/// and a host with a port are quoted, as the grammar wants.
fn forwarded_element(origin: &Origin, w: &mut dyn Write) -> fmt::Result {
    match origin.client {
        Some(IpAddr::V4(ip)) => {
            w.write_str("for=")?;
            write_ipv4(ip, w)
        }
        Some(IpAddr::V6(ip)) => write!(w, "for=\"[{ip}]\""),
        None => w.write_str("for=unknown"),
    }?;
    w.write_str(";proto=")?;
    w.write_str(origin.proto)?;
    if let Some(host) = origin.host.as_ref().and_then(|h| h.to_str().ok()) {
        if host.bytes().all(is_tchar) {
            w.write_str(";host=")?;
            w.write_str(host)?;
        } else if !host.contains(['"', '\\']) {
            w.write_str(";host=\"")?;
            w.write_str(host)?;
            w.write_str("\"")?;
        }
    }
    Ok(())
}

/// A field value `write` formats: on the stack, then one copy into its `Bytes` (a
/// `String` would be a second allocation); a value longer than the stack's room is
/// formatted into a `String` instead.
fn value_of(write: impl Fn(&mut dyn Write) -> fmt::Result) -> Bytes {
    let mut stack = StackValue {
        buf: [0; 128],
        len: 0,
    };
    if write(&mut stack).is_ok() {
        return Bytes::copy_from_slice(&stack.buf[..stack.len]);
    }
    let mut long = String::new();
    let _ = write(&mut long);
    Bytes::from(long)
}

/// A field value being formatted on the stack: writing past its room fails.
struct StackValue {
    buf: [u8; 128],
    len: usize,
}

impl Write for StackValue {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let end = self.len + s.len();
        let room = self.buf.get_mut(self.len..end).ok_or(fmt::Error)?;
        room.copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
}

/// A token character (RFC 9110 §5.6.2).
fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hop_by_hop_fields_and_those_connection_names_go() {
        let mut h = HeaderMap::new();
        h.insert(
            header::CONNECTION,
            HeaderValue::from_static("keep-alive, X-Hop"),
        );
        h.insert("x-hop", HeaderValue::from_static("1"));
        h.insert("keep-alive", HeaderValue::from_static("timeout=5"));
        h.insert("proxy-connection", HeaderValue::from_static("keep-alive"));
        h.insert(
            header::PROXY_AUTHORIZATION,
            HeaderValue::from_static("Basic x"),
        );
        h.insert(
            header::TRANSFER_ENCODING,
            HeaderValue::from_static("chunked"),
        );
        h.insert(header::TE, HeaderValue::from_static("trailers"));
        h.insert(header::TRAILER, HeaderValue::from_static("x-t"));
        h.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
        h.insert(header::ACCEPT, HeaderValue::from_static("*/*"));
        h.insert(header::CONTENT_LENGTH, HeaderValue::from_static("3"));
        strip_hop_by_hop(&mut h);
        let mut left: Vec<_> = h.keys().map(|k| k.as_str()).collect();
        left.sort_unstable();
        assert_eq!(left, ["accept", "content-length"]);
    }

    #[test]
    fn te_trailers_is_found_among_codings() {
        let mut h = HeaderMap::new();
        assert!(!accepts_trailers(&h));
        h.insert(header::TE, HeaderValue::from_static("gzip;q=0.5"));
        h.append(header::TE, HeaderValue::from_static("deflate, Trailers"));
        assert!(accepts_trailers(&h));
    }

    fn origin(client: Option<IpAddr>, host: &'static str) -> Origin {
        Origin {
            client,
            proto: "https",
            host: Some(HeaderValue::from_static(host)),
            version: Version::HTTP_2,
        }
    }

    #[test]
    fn forwarding_fields_append_to_what_came() {
        let config = Config::default().with_forwarded(true);
        let mut h = HeaderMap::new();
        h.append(X_FORWARDED_FOR, HeaderValue::from_static("10.0.0.1"));
        h.append(X_FORWARDED_FOR, HeaderValue::from_static("10.0.0.2"));
        h.insert(X_FORWARDED_PROTO, HeaderValue::from_static("gopher"));
        h.insert(header::VIA, HeaderValue::from_static("1.1 edge"));
        let o = origin(Some("192.0.2.7".parse().unwrap()), "example.com:8443");
        add_forwarding(&mut h, &config, &o);
        assert_eq!(h[&X_FORWARDED_FOR], "10.0.0.1, 10.0.0.2, 192.0.2.7");
        assert_eq!(h[&X_FORWARDED_PROTO], "https");
        assert_eq!(h[header::VIA], "1.1 edge, 2 fibr");
        assert_eq!(
            h[header::FORWARDED],
            "for=192.0.2.7;proto=https;host=\"example.com:8443\""
        );
    }

    #[test]
    fn a_clients_kept_values_go_to_no_other_client() {
        let fields = |o: &Origin| {
            let mut h = HeaderMap::new();
            add_forwarding(&mut h, &Config::default().with_forwarded(true), o);
            let text = |name| h[name].to_str().unwrap().to_owned();
            (text(&header::FORWARDED), text(&X_FORWARDED_FOR))
        };
        let a = origin(Some("192.0.2.7".parse().unwrap()), "a.example");
        let other_ip = origin(Some("192.0.2.8".parse().unwrap()), "a.example");
        let other_host = origin(Some("192.0.2.7".parse().unwrap()), "b.example");
        let other_proto = Origin {
            proto: "http",
            ..origin(Some("192.0.2.7".parse().unwrap()), "a.example")
        };
        let no_host = Origin {
            host: None,
            ..origin(Some("192.0.2.7".parse().unwrap()), "a.example")
        };
        for _ in 0..2 {
            assert_eq!(
                fields(&a),
                (
                    "for=192.0.2.7;proto=https;host=a.example".into(),
                    "192.0.2.7".into()
                )
            );
            assert_eq!(
                fields(&other_ip),
                (
                    "for=192.0.2.8;proto=https;host=a.example".into(),
                    "192.0.2.8".into()
                )
            );
            assert_eq!(fields(&a).0, "for=192.0.2.7;proto=https;host=a.example");
            assert_eq!(
                fields(&other_host).0,
                "for=192.0.2.7;proto=https;host=b.example"
            );
            assert_eq!(
                fields(&other_proto).0,
                "for=192.0.2.7;proto=http;host=a.example"
            );
            assert_eq!(fields(&no_host).0, "for=192.0.2.7;proto=https");
        }
    }

    #[test]
    fn ipv4_is_written_in_dotted_decimal() {
        for ip in [
            "0.0.0.0",
            "255.255.255.255",
            "10.0.100.9",
            "192.0.2.7",
            "1.22.199.250",
        ] {
            let ip: std::net::Ipv4Addr = ip.parse().unwrap();
            let mut s = String::new();
            write_ipv4(ip, &mut s).unwrap();
            assert_eq!(s, ip.to_string());
        }
    }

    #[test]
    fn forwarded_quotes_ipv6_and_each_choice_can_be_off() {
        let o = origin(Some("2001:db8::1".parse().unwrap()), "example.com");
        assert_eq!(
            value_of(|w| forwarded_element(&o, w)),
            "for=\"[2001:db8::1]\";proto=https;host=example.com"
        );
        // Longer than the stack's room: formatted whole all the same.
        let long_host = "h".repeat(300);
        let o = Origin {
            host: Some(HeaderValue::from_str(&long_host).unwrap()),
            ..origin(None, "x")
        };
        assert_eq!(
            value_of(|w| forwarded_element(&o, w)),
            format!("for=unknown;proto=https;host={long_host}").as_str()
        );
        let none = Config::default()
            .with_x_forwarded_for(false)
            .with_x_forwarded_proto(false)
            .with_via(false);
        let mut h = HeaderMap::new();
        add_forwarding(&mut h, &none, &o);
        assert!(h.is_empty());
    }
}
