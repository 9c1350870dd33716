//! Who may use a proxy and where it may go. A proxy reachable by anyone that dials
//! anywhere is an open relay (spam, scans, a way into the private network behind it), so
//! [`Rules`] refuses everything until an allow rule is added, and refuses targets in
//! loopback, private and other special ranges unless a network rule names them or
//! [`Rules::allow_all`] says an open relay is meant.

use super::{Credentials, Failure};
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::ops::RangeInclusive;
use std::str::FromStr;
use std::sync::Arc;

/// Checks a user name and password (SOCKS5's RFC 1929 subnegotiation, HTTP's Basic
/// `Proxy-Authorization`). Runs on a worker during the handshake: keep it quick.
pub type Authenticator = dyn Fn(&str, &str) -> bool + Send + Sync;

/// An IP network (`10.0.0.0/8`, `::1/128`; a bare address is a network of one).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IpNet {
    addr: IpAddr,
    prefix: u8,
}

impl IpNet {
    /// The network of `addr`'s first `prefix` bits (at most 32 for IPv4, 128 for IPv6).
    pub fn new(addr: IpAddr, prefix: u8) -> Option<IpNet> {
        let max = if addr.is_ipv4() { 32 } else { 128 };
        (prefix <= max).then_some(IpNet {
            addr: addr.to_canonical(),
            prefix,
        })
    }

    /// True if `ip` is in the network (an IPv4-mapped IPv6 address counts as IPv4).
    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.addr, ip.to_canonical()) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => {
                prefix_eq(&net.octets(), &ip.octets(), self.prefix)
            }
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                prefix_eq(&net.octets(), &ip.octets(), self.prefix)
            }
            _ => false,
        }
    }
}

fn prefix_eq(a: &[u8], b: &[u8], bits: u8) -> bool {
    let (whole, rest) = (usize::from(bits / 8), bits % 8);
    if a[..whole] != b[..whole] {
        return false;
    }
    rest == 0 || (a[whole] ^ b[whole]) >> (8 - rest) == 0
}

impl From<IpAddr> for IpNet {
    fn from(addr: IpAddr) -> IpNet {
        let prefix = if addr.is_ipv4() { 32 } else { 128 };
        IpNet {
            addr: addr.to_canonical(),
            prefix,
        }
    }
}

/// Not an address, or a prefix out of range.
#[derive(Debug)]
pub struct InvalidNet(String);

impl fmt::Display for InvalidNet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?} is not an IP network (like 10.0.0.0/8)", self.0)
    }
}

impl std::error::Error for InvalidNet {}

impl FromStr for IpNet {
    type Err = InvalidNet;

    fn from_str(s: &str) -> Result<IpNet, InvalidNet> {
        let bad = || InvalidNet(s.to_owned());
        match s.split_once('/') {
            None => s.parse::<IpAddr>().map(IpNet::from).map_err(|_| bad()),
            Some((addr, prefix)) => {
                let addr = addr.parse::<IpAddr>().map_err(|_| bad())?;
                let prefix = prefix.parse::<u8>().map_err(|_| bad())?;
                IpNet::new(addr, prefix).ok_or_else(bad)
            }
        }
    }
}

/// Which targets a target rule names.
#[derive(Clone, Debug)]
enum Hosts {
    /// By resolved address: the only kind that can allow a special-range target.
    Net(IpNet),
    /// A host name as the client sent it, exactly (ASCII case ignored).
    Name(String),
    /// The name and every name under it (`example.com` covers `a.example.com`).
    Domain(String),
}

#[derive(Clone, Debug)]
struct TargetRule {
    hosts: Hosts,
    ports: RangeInclusive<u16>,
}

/// The allow rules of a proxy (see the module docs). Each kind of rule present must be
/// met: a client in an allowed network, valid credentials, a target an allowed one.
#[derive(Clone, Default)]
pub struct Rules {
    clients: Vec<IpNet>,
    targets: Vec<TargetRule>,
    auth: Option<Arc<Authenticator>>,
    open: bool,
}

impl fmt::Debug for Rules {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Rules")
            .field("clients", &self.clients)
            .field("targets", &self.targets)
            .field("auth", &self.auth.is_some())
            .field("open", &self.open)
            .finish()
    }
}

impl Rules {
    /// No rule: every request is refused until one is added.
    pub fn new() -> Rules {
        Rules::default()
    }

    /// An open relay: any client, any target, the special ranges included. Credentials
    /// are still required if an authenticator is set.
    pub fn allow_all() -> Rules {
        Rules {
            open: true,
            ..Rules::default()
        }
    }

    /// Allows clients whose address is in `net`.
    #[must_use]
    pub fn allow_clients(mut self, net: IpNet) -> Rules {
        self.clients.push(net);
        self
    }

    /// Allows targets whose address is in `net` on `ports`; a special range (loopback,
    /// private...) is reachable only through such a rule (or `allow_all`).
    #[must_use]
    pub fn allow_target_net(mut self, net: IpNet, ports: RangeInclusive<u16>) -> Rules {
        self.targets.push(TargetRule {
            hosts: Hosts::Net(net),
            ports,
        });
        self
    }

    /// Allows the target host name `name` (as the client sent it) on `ports`.
    #[must_use]
    pub fn allow_target_host(mut self, name: &str, ports: RangeInclusive<u16>) -> Rules {
        self.targets.push(TargetRule {
            hosts: Hosts::Name(name.to_ascii_lowercase()),
            ports,
        });
        self
    }

    /// Allows `domain` and every name under it on `ports`.
    #[must_use]
    pub fn allow_target_domain(mut self, domain: &str, ports: RangeInclusive<u16>) -> Rules {
        let domain = domain.trim_start_matches('.').to_ascii_lowercase();
        self.targets.push(TargetRule {
            hosts: Hosts::Domain(domain),
            ports,
        });
        self
    }

    /// Requires credentials that `check(user, password)` accepts: SOCKS5 then offers only
    /// username/password, HTTP answers 407 without them, SOCKS4 (which has no password)
    /// is refused.
    #[must_use]
    pub fn require_auth(
        mut self,
        check: impl Fn(&str, &str) -> bool + Send + Sync + 'static,
    ) -> Rules {
        self.auth = Some(Arc::new(check));
        self
    }

    /// True if clients must authenticate.
    pub fn auth_required(&self) -> bool {
        self.auth.is_some()
    }

    /// Checks credentials against the authenticator (false when there is none).
    pub(crate) fn verify(&self, creds: &Credentials) -> bool {
        self.auth
            .as_ref()
            .is_some_and(|check| check(&creds.user, &creds.password))
    }

    /// The checks that come before the target is resolved: is there any rule, is the
    /// client allowed, did it authenticate if it must.
    pub(crate) fn check_client(&self, client: Option<IpAddr>, authed: bool) -> Result<(), Failure> {
        if !self.open && self.clients.is_empty() && self.targets.is_empty() && self.auth.is_none() {
            return Err(Failure::NotAllowed);
        }
        if !self.clients.is_empty()
            && !client.is_some_and(|ip| self.clients.iter().any(|n| n.contains(ip)))
        {
            return Err(Failure::NotAllowed);
        }
        if self.auth.is_some() && !authed {
            return Err(Failure::AuthRequired);
        }
        Ok(())
    }

    /// The checks on one resolved target: `name` is the host name the client sent, if it
    /// sent one.
    pub(crate) fn check_target(&self, name: Option<&str>, ip: IpAddr, port: u16) -> bool {
        if self.open {
            return true;
        }
        let by_net = self
            .targets
            .iter()
            .any(|r| r.ports.contains(&port) && matches!(r.hosts, Hosts::Net(n) if n.contains(ip)));
        if by_net {
            return true;
        }
        if is_special(ip) {
            return false;
        }
        self.targets.is_empty()
            || self.targets.iter().any(|r| {
                r.ports.contains(&port)
                    && name.is_some_and(|name| match &r.hosts {
                        Hosts::Name(n) => name.eq_ignore_ascii_case(n),
                        Hosts::Domain(d) => {
                            name.eq_ignore_ascii_case(d)
                                || name.len() > d.len()
                                    && name.as_bytes()[name.len() - d.len() - 1] == b'.'
                                    && name[name.len() - d.len()..].eq_ignore_ascii_case(d)
                        }
                        Hosts::Net(_) => false,
                    })
            })
    }
}

/// Addresses a proxy must not reach by default: this host, private and shared networks,
/// link-local, and what is not a unicast host at all.
fn is_special(ip: IpAddr) -> bool {
    match ip.to_canonical() {
        IpAddr::V4(v4) => is_special_v4(v4),
        IpAddr::V6(v6) => is_special_v6(v6),
    }
}

fn is_special_v4(ip: Ipv4Addr) -> bool {
    let [a, b, ..] = ip.octets();
    ip.is_unspecified()
        || ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local()
        || ip.is_broadcast()
        || ip.is_multicast()
        || a == 0
        // Shared address space (carrier-grade NAT), RFC 6598.
        || (a == 100 && (64..128).contains(&b))
        // Reserved for future use (240/4).
        || a >= 240
}

fn is_special_v6(ip: Ipv6Addr) -> bool {
    let first = ip.segments()[0];
    ip.is_unspecified()
        || ip.is_loopback()
        || ip.is_multicast()
        // Unique local (fc00::/7) and link-local (fe80::/10).
        || first & 0xfe00 == 0xfc00
        || first & 0xffc0 == 0xfe80
        // NAT64 (64:ff9b::/96) can reach IPv4's special ranges.
        || (first == 0x64 && ip.segments()[1] == 0xff9b)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn networks_parse_and_contain() {
        let n: IpNet = "10.1.0.0/16".parse().unwrap();
        assert!(n.contains(ip("10.1.255.3")));
        assert!(!n.contains(ip("10.2.0.1")));
        assert!(n.contains(ip("::ffff:10.1.2.3")));
        let odd: IpNet = "192.168.1.128/25".parse().unwrap();
        assert!(odd.contains(ip("192.168.1.200")));
        assert!(!odd.contains(ip("192.168.1.100")));
        let one: IpNet = "::1".parse().unwrap();
        assert!(one.contains(ip("::1")) && !one.contains(ip("::2")));
        assert!("0.0.0.0/0"
            .parse::<IpNet>()
            .unwrap()
            .contains(ip("8.8.8.8")));
        for bad in ["10.0.0.0/33", "::/129", "host/8", "10.0.0.0/x"] {
            assert!(bad.parse::<IpNet>().is_err(), "{bad}");
        }
    }

    #[test]
    fn no_rule_refuses_everything() {
        let r = Rules::new();
        assert_eq!(
            r.check_client(Some(ip("8.8.8.8")), false),
            Err(Failure::NotAllowed)
        );
    }

    #[test]
    fn client_rule_admits_its_network_but_not_special_targets() {
        let r = Rules::new().allow_clients("127.0.0.0/8".parse().unwrap());
        assert_eq!(r.check_client(Some(ip("127.0.0.1")), false), Ok(()));
        assert_eq!(
            r.check_client(Some(ip("10.0.0.1")), false),
            Err(Failure::NotAllowed)
        );
        assert_eq!(r.check_client(None, false), Err(Failure::NotAllowed));
        assert!(r.check_target(None, ip("93.184.216.34"), 443));
        for special in [
            "127.0.0.1",
            "10.0.0.1",
            "172.16.5.4",
            "192.168.0.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "224.0.0.1",
            "::1",
            "fd00::1",
            "fe80::1",
            "::ffff:127.0.0.1",
            "64:ff9b::a00:1",
        ] {
            assert!(!r.check_target(Some("x"), ip(special), 80), "{special}");
        }
    }

    #[test]
    fn a_net_rule_is_what_opens_a_special_range() {
        let r = Rules::new().allow_target_net("127.0.0.1".parse().unwrap(), 8000..=8999);
        assert_eq!(r.check_client(Some(ip("203.0.113.9")), false), Ok(()));
        assert!(r.check_target(None, ip("127.0.0.1"), 8080));
        assert!(!r.check_target(None, ip("127.0.0.1"), 22));
        assert!(!r.check_target(None, ip("127.0.0.2"), 8080));
        // Only the listed targets, once any is listed.
        assert!(!r.check_target(None, ip("93.184.216.34"), 8080));
        // A host rule does not open a special range the name resolves to.
        let h = Rules::new().allow_target_host("localhost", 1..=65535);
        assert!(!h.check_target(Some("localhost"), ip("127.0.0.1"), 80));
    }

    #[test]
    fn host_and_domain_rules_match_names() {
        let r = Rules::new()
            .allow_target_host("Example.org", 443..=443)
            .allow_target_domain("example.com", 80..=443);
        let public = ip("93.184.216.34");
        assert!(r.check_target(Some("example.org"), public, 443));
        assert!(!r.check_target(Some("a.example.org"), public, 443));
        assert!(!r.check_target(Some("example.org"), public, 80));
        assert!(r.check_target(Some("EXAMPLE.com"), public, 80));
        assert!(r.check_target(Some("a.b.example.com"), public, 443));
        assert!(!r.check_target(Some("badexample.com"), public, 443));
        assert!(!r.check_target(None, public, 443));
    }

    #[test]
    fn auth_rule_requires_valid_credentials() {
        let r = Rules::new().require_auth(|u, p| u == "alice" && p == "s3cret");
        assert_eq!(
            r.check_client(Some(ip("8.8.8.8")), false),
            Err(Failure::AuthRequired)
        );
        assert_eq!(r.check_client(Some(ip("8.8.8.8")), true), Ok(()));
        let good = Credentials {
            user: "alice".into(),
            password: "s3cret".into(),
        };
        let bad = Credentials {
            user: "alice".into(),
            password: "guess".into(),
        };
        assert!(r.verify(&good) && !r.verify(&bad));
        assert!(!Rules::allow_all().verify(&good));
    }

    #[test]
    fn allow_all_is_open() {
        let r = Rules::allow_all();
        assert_eq!(r.check_client(None, false), Ok(()));
        assert!(r.check_target(None, ip("127.0.0.1"), 22));
    }
}
