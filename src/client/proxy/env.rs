//! Proxies named by the environment (`Proxy::from_env`), read through a lookup function
//! so that the rules are tested without touching the process's environment.

use super::no_proxy::NoProxy;
use super::{Proxy, Schemes};

/// The proxies `var` names: one for `http://` targets, one for `https://` ones.
pub(super) fn proxies(var: impl Fn(&str) -> Option<String>) -> Vec<Proxy> {
    // The first of `names` that is set and not blank: (its name, its value).
    let first = |names: &[&'static str]| {
        names.iter().find_map(|&name| {
            var(name)
                .filter(|v| !v.trim().is_empty())
                .map(|v| (name, v))
        })
    };
    // In a CGI script HTTP_PROXY comes from the request's `Proxy:` header ("httpoxy").
    let http_names: &[&str] = if var("REQUEST_METHOD").is_some() {
        &["http_proxy"]
    } else {
        &["http_proxy", "HTTP_PROXY"]
    };
    let all = ["all_proxy", "ALL_PROXY"];
    let no_proxy = first(&["no_proxy", "NO_PROXY"]).map(|(_, list)| NoProxy::parse(&list));
    let http = first(http_names).or_else(|| first(&all));
    let https = first(&["https_proxy", "HTTPS_PROXY"]).or_else(|| first(&all));
    [(Schemes::Http, http), (Schemes::Https, https)]
        .into_iter()
        .filter_map(|(schemes, found)| {
            let (name, url) = found?;
            let mut proxy = Proxy::new(&url, schemes).unwrap_or_else(|e| {
                Proxy::unusable(schemes, format!("the environment's {name}: {e}"))
            });
            proxy.no_proxy = no_proxy.clone();
            Some(proxy)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::{route, Kind, Route};
    use super::*;
    use http::Uri;
    use std::collections::HashMap;

    fn from(vars: &[(&str, &str)]) -> Vec<Proxy> {
        let map: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        proxies(|k| map.get(k).cloned())
    }

    /// Where a request to `uri` goes: `None` direct, else the proxy's URL.
    fn via(proxies: &[Proxy], uri: &str) -> Option<String> {
        let uri: Uri = uri.parse().unwrap();
        match route(proxies, &uri, false) {
            Route::Direct => None,
            Route::Tunnel(p) | Route::Forward(p) => Some(match &p.endpoint {
                Ok(ep) => ep.to_string(),
                Err(why) => format!("unusable: {why}"),
            }),
        }
    }

    #[test]
    fn per_scheme_variables_then_all_proxy() {
        let p = from(&[("http_proxy", "http://h:1"), ("ALL_PROXY", "socks5h://s:2")]);
        assert_eq!(via(&p, "http://a.test/").as_deref(), Some("http://h:1"));
        assert_eq!(via(&p, "https://a.test/").as_deref(), Some("socks5h://s:2"));
        let p = from(&[("HTTPS_PROXY", "socks4a://s:3")]);
        assert_eq!(via(&p, "http://a.test/"), None);
        assert_eq!(via(&p, "https://a.test/").as_deref(), Some("socks4a://s:3"));
        assert!(from(&[]).is_empty());
        assert!(from(&[("http_proxy", "  ")]).is_empty(), "blank is unset");
    }

    #[test]
    fn lowercase_wins_and_cgi_ignores_uppercase_http_proxy() {
        let p = from(&[
            ("http_proxy", "http://low:1"),
            ("HTTP_PROXY", "http://up:1"),
        ]);
        assert_eq!(via(&p, "http://a.test/").as_deref(), Some("http://low:1"));
        let p = from(&[("HTTP_PROXY", "http://up:1")]);
        assert_eq!(via(&p, "http://a.test/").as_deref(), Some("http://up:1"));
        let p = from(&[("HTTP_PROXY", "http://evil:1"), ("REQUEST_METHOD", "GET")]);
        assert_eq!(via(&p, "http://a.test/"), None);
        let p = from(&[
            ("no_proxy", "a.test"),
            ("NO_PROXY", "b.test"),
            ("all_proxy", "h:1"),
        ]);
        assert_eq!(via(&p, "http://a.test/"), None);
        assert!(via(&p, "http://b.test/").is_some());
    }

    #[test]
    fn no_proxy_applies_to_both_and_a_bad_url_fails_rather_than_going_direct() {
        let p = from(&[
            ("all_proxy", "127.0.0.1:3128"),
            ("NO_PROXY", "localhost,.internal,10.0.0.0/8"),
        ]);
        assert_eq!(p[0].endpoint.as_ref().unwrap().kind, Kind::Http);
        for direct in [
            "http://localhost:8080/",
            "https://x.internal/",
            "http://10.1.2.3/",
        ] {
            assert_eq!(via(&p, direct), None, "{direct}");
        }
        assert!(via(&p, "https://example.com/").is_some());
        let p = from(&[("https_proxy", "ftp://nope")]);
        let shown = via(&p, "https://a.test/").unwrap();
        assert!(
            shown.starts_with("unusable: the environment's https_proxy"),
            "{shown}"
        );
    }
}
