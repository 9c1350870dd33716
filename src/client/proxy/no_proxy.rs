//! `NO_PROXY`: the hosts that are reached directly, read as curl reads them. A comma
//! list of `*` (every host), IP addresses and CIDR ranges (`10.0.0.0/8`, `::1`), and
//! domain names, each of which matches itself and its subdomains (`example.com` and
//! `.example.com` both match `example.com` and `www.example.com`, not `myexample.com`).
//! Ports are not part of an entry (an entry with one matches nothing).

use std::net::IpAddr;

/// A parsed `NO_PROXY` list.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct NoProxy {
    all: bool,
    /// Lowercase, without leading or trailing dots.
    domains: Vec<String>,
    nets: Vec<(IpAddr, u8)>,
}

impl NoProxy {
    pub fn parse(list: &str) -> NoProxy {
        let mut no = NoProxy::default();
        for entry in list.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            if entry == "*" {
                no.all = true;
            } else if let Some(net) = parse_net(entry) {
                no.nets.push(net);
            } else {
                let name = entry.trim_start_matches("*.").trim_matches('.');
                if !name.is_empty() {
                    no.domains.push(name.to_ascii_lowercase());
                }
            }
        }
        no
    }

    /// Whether `host` (a URI's host: a name, an IPv4 literal or a bracketed IPv6 one) is
    /// reached directly.
    pub fn matches(&self, host: &str) -> bool {
        if self.all {
            return true;
        }
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        if let Ok(ip) = bare.parse::<IpAddr>() {
            return self
                .nets
                .iter()
                .any(|&(net, prefix)| in_net(ip, net, prefix));
        }
        let host = bare.trim_end_matches('.').to_ascii_lowercase();
        self.domains.iter().any(|d| {
            host == *d
                || (host.len() > d.len()
                    && host.ends_with(d.as_str())
                    && host.as_bytes()[host.len() - d.len() - 1] == b'.')
        })
    }
}

/// `ip` or `ip/prefix` (brackets allowed around an IPv6 address).
fn parse_net(entry: &str) -> Option<(IpAddr, u8)> {
    let (addr, prefix) = match entry.split_once('/') {
        Some((a, p)) => (a, Some(p.parse::<u8>().ok()?)),
        None => (entry, None),
    };
    let ip: IpAddr = addr
        .trim_start_matches('[')
        .trim_end_matches(']')
        .parse()
        .ok()?;
    let max = if ip.is_ipv4() { 32 } else { 128 };
    let prefix = prefix.unwrap_or(max);
    (prefix <= max).then_some((ip, prefix))
}

fn in_net(ip: IpAddr, net: IpAddr, prefix: u8) -> bool {
    let (ip, net, bits) = match (ip, net) {
        (IpAddr::V4(a), IpAddr::V4(n)) => (u32::from(a) as u128, u32::from(n) as u128, 32),
        (IpAddr::V6(a), IpAddr::V6(n)) => (u128::from(a), u128::from(n), 128),
        _ => return false,
    };
    let host_bits = bits - prefix as u32;
    host_bits == bits || (ip ^ net) >> host_bits == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn domains_match_themselves_and_their_subdomains() {
        let no = NoProxy::parse("example.com, .internal.test ,*.wild.test,Local.");
        for host in [
            "example.com",
            "www.example.com",
            "a.b.example.com",
            "EXAMPLE.com.",
            "internal.test",
            "x.internal.test",
            "x.wild.test",
            "local",
        ] {
            assert!(no.matches(host), "{host}");
        }
        for host in ["myexample.com", "example.org", "com", "test", "127.0.0.1"] {
            assert!(!no.matches(host), "{host}");
        }
    }

    #[test]
    fn addresses_and_ranges() {
        let no = NoProxy::parse("127.0.0.1,10.0.0.0/8,::1,[fd00::]/8,192.168.1.0/33");
        for host in ["127.0.0.1", "10.200.3.4", "[::1]", "[fd12::1]"] {
            assert!(no.matches(host), "{host}");
        }
        for host in ["127.0.0.2", "11.0.0.1", "[::2]", "192.168.1.1", "localhost"] {
            assert!(!no.matches(host), "{host}");
        }
        assert!(NoProxy::parse("0.0.0.0/0").matches("8.8.8.8"));
        assert!(!NoProxy::parse("0.0.0.0/0").matches("[::1]"));
    }

    #[test]
    fn star_and_empty() {
        assert!(NoProxy::parse("*").matches("anything"));
        assert!(NoProxy::parse("a.test,*").matches("[::1]"));
        let none = NoProxy::parse(" , ,");
        assert_eq!(none, NoProxy::default());
        assert!(!none.matches("a.test"));
        // A port is not part of an entry: it matches nothing.
        assert!(!NoProxy::parse("a.test:8080").matches("a.test"));
    }
}
