//! The client machines against the server machines, in memory: one codec, both roles,
//! with delivery whole and split at every byte.

use super::*;
use crate::proto::tunnel::{Auth, ClientHandshake, Failure, ServerHandshake, Step};
use std::net::SocketAddr;

/// How the server answers a request.
#[derive(Clone, Copy)]
enum Answer {
    Connected(SocketAddr),
    Failed(Failure),
}

/// Runs `client` against `server`, each side's bytes delivered at most `chunk` at a time
/// (and the client's reads bounded by its `want`); the password "pw" is the right one.
/// The client's outcome, and the server's last step (the request it saw, or `Close`).
fn exchange(
    mut client: impl ClientHandshake<Error = SocksError>,
    server: &mut dyn ServerHandshake,
    answer: Answer,
    chunk: usize,
) -> (Result<bool, SocksError>, Step) {
    let mut to_server = Vec::new();
    let mut to_client = Vec::new();
    let mut last = Step::More;
    client.start(&mut to_server);
    loop {
        while !to_server.is_empty() && last == Step::More {
            let n = chunk.min(to_server.len());
            let bytes: Vec<u8> = to_server.drain(..n).collect();
            let mut step = server.receive(&bytes, &mut to_client);
            while let Step::Authenticate(creds) = step {
                step = server.authenticated(creds.password == "pw", &mut to_client);
            }
            if let Step::Connect(..) | Step::Bind(..) = step {
                match answer {
                    Answer::Connected(bound) => server.connected(bound, &mut to_client),
                    Answer::Failed(why) => server.failed(why, &mut to_client),
                }
            }
            last = step;
        }
        assert!(
            !to_client.is_empty() || last != Step::More,
            "both sides wait"
        );
        while !to_client.is_empty() {
            let n = chunk.min(client.want()).min(to_client.len());
            assert!(n >= 1, "the client wants nothing but is answered");
            let bytes: Vec<u8> = to_client.drain(..n).collect();
            match client.receive(&bytes, &mut to_server) {
                Ok(false) => {}
                r => return (r, last),
            }
        }
        if last != Step::More {
            // The server is done: it closes (a tunnel's reply is whole by now).
            return (client.receive(&[], &mut to_server), last);
        }
    }
}

const SPLITS: [usize; 4] = [1, 2, 3, usize::MAX];

fn targets() -> [Target; 3] {
    [
        Target::Addr("10.1.2.3:443".parse().unwrap()),
        Target::Addr("[2001:db8::1]:8080".parse().unwrap()),
        Target::Name("example.com".into(), 80),
    ]
}

#[test]
fn socks5_tunnels_every_target_with_and_without_a_password() {
    let bound = Answer::Connected("[::1]:1080".parse().unwrap());
    for chunk in SPLITS {
        for t in targets() {
            let c = client::Socks5::new(&t, None).unwrap();
            let got = exchange(c, &mut server::Socks5::new(false), bound, chunk);
            assert_eq!(got, (Ok(true), Step::Connect(t.clone(), Auth::None)));

            let c = client::Socks5::new(&t, Some(("u", "pw"))).unwrap();
            let got = exchange(c, &mut server::Socks5::new(true), bound, chunk);
            assert_eq!(got, (Ok(true), Step::Connect(t.clone(), Auth::Verified)));
            // Credentials offered to a server that wants none: not used.
            let c = client::Socks5::new(&t, Some(("u", "pw"))).unwrap();
            let got = exchange(c, &mut server::Socks5::new(false), bound, chunk);
            assert_eq!(got, (Ok(true), Step::Connect(t, Auth::None)));
        }
    }
}

#[test]
fn socks5_refusals_reach_the_client() {
    let t = Target::Name("example.com".into(), 80);
    let bound = Answer::Connected("127.0.0.1:1".parse().unwrap());
    for chunk in SPLITS {
        let c = client::Socks5::new(&t, Some(("u", "bad"))).unwrap();
        let got = exchange(c, &mut server::Socks5::new(true), bound, chunk);
        assert_eq!(got, (Err(SocksError::AuthFailed(1)), Step::Close));

        let c = client::Socks5::new(&t, None).unwrap();
        let got = exchange(c, &mut server::Socks5::new(true), bound, chunk);
        let none = SocksError::NoAcceptableMethod {
            offered_password: false,
        };
        assert_eq!(got, (Err(none), Step::Close));

        for (why, code) in [
            (Failure::NotAllowed, reply::NOT_ALLOWED),
            (Failure::Refused, reply::REFUSED),
            (Failure::HostUnreachable, reply::HOST_UNREACHABLE),
            (Failure::TimedOut, reply::TTL_EXPIRED),
        ] {
            let c = client::Socks5::new(&t, None).unwrap();
            let got = exchange(
                c,
                &mut server::Socks5::new(false),
                Answer::Failed(why),
                chunk,
            );
            assert_eq!(got.0, Err(SocksError::Reply(code)));
        }
    }
}

#[test]
fn socks4_and_4a_tunnel_and_refuse() {
    let bound = Answer::Connected("127.0.0.1:1080".parse().unwrap());
    for chunk in SPLITS {
        for t in [
            Target::Addr("10.1.2.3:443".parse().unwrap()),
            Target::Name("example.com".into(), 80),
        ] {
            let c = client::Socks4::new(&t, "me").unwrap();
            let got = exchange(c, &mut server::Socks4::new(), bound, chunk);
            assert_eq!(got, (Ok(true), Step::Connect(t.clone(), Auth::None)));

            let c = client::Socks4::new(&t, "").unwrap();
            let refused = Answer::Failed(Failure::Refused);
            let got = exchange(c, &mut server::Socks4::new(), refused, chunk);
            assert_eq!(got.0, Err(SocksError::Rejected4(reply4::REJECTED)));
        }
    }
}
