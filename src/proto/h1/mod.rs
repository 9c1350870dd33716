//! Sans-IO HTTP/1.1, both roles: the connection machines and the codec under them. No
//! sockets, threads or clocks (the Date header's per-thread cache in `date` aside; the
//! machines are handed the time and a Date source).
//!
//! - `server`: `ServerConn`, the server side of a connection (requests in, responses out
//!   in order, keep-alive, 100-continue, upgrades, timeouts, limits). Driven by
//!   `http::server`.
//! - `client_conn`: `ClientConn`, the client side (request heads out, response heads in
//!   past bounded 1xx, the reuse decision). Driven by `client::conn`.
//! - `parse`: `parse_request_head(buf, &Limits)` → `RequestHead` and the bytes consumed,
//!   enforcing RFC 9112's message-framing and validation rules. `ParseError::status()` is
//!   the status to answer with; any `ParseError` means: answer, then close.
//! - `client`: `parse_response_head` (framing per RFC 9112 §6.3, keep-alive) and
//!   `encode_request_head` with `BodyFraming::choose`.
//! - `body`: `BodyFraming` (one framing for both roles and directions), `BodyDecoder`
//!   (length, chunked, until close; trailers bounded by `MAX_TRAILER_BYTES`) and
//!   `BodyEncoder` (chunk lines, a Content-Length held to).
//! - `chunked`: `ChunkedDecoder`, the chunked coding's incremental, zero-copy state machine.
//! - `encode`: response heads (`encode_head`, `framing_for`), chunk encoders,
//!   `response_wants_close`.

pub(crate) mod body;
pub(crate) mod chunked;
#[cfg(any(feature = "client", feature = "fuzzing"))]
pub(crate) mod client;
#[cfg(feature = "client")]
pub(crate) mod client_conn;
pub(crate) mod encode;
pub(crate) mod error;
pub(crate) mod framing;
pub(crate) mod parse;
pub(crate) mod server;

#[cfg(all(test, feature = "client"))]
mod pair_tests;

#[cfg(test)]
pub(crate) mod testutil {
    /// xorshift64*: enough randomness for fuzz-style tests without a dependency.
    pub(crate) struct Rng(pub(crate) u64);

    impl Rng {
        pub(crate) fn next(&mut self) -> u64 {
            let mut x = self.0;
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            self.0 = x;
            x.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }

        /// Uniform-ish in `0..n` (`n > 0`).
        pub(crate) fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }
    }
}

#[cfg(test)]
mod tests {
    use super::chunked::tests::DEFAULT_MAX_TRAILER_BYTES;
    use super::chunked::{ChunkedDecoder, Decoded};
    use super::encode::{encode_head, framing_for, response_wants_close};
    use super::framing::BodyFraming as ResponseFraming;
    use super::framing::BodyFraming;
    use super::parse::{parse_request_head, Limits};
    use http::{HeaderMap, Method, StatusCode, Version};

    /// The flow a dispatcher follows: pipelined requests with every kind of body, read
    /// from one buffer.
    #[test]
    fn pipelined_requests_with_bodies() {
        let input: &[u8] = b"POST /a HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n\
            3\r\nabc\r\n2;x=y\r\nde\r\n0\r\nX-T: 1\r\n\r\n\
            PUT /b HTTP/1.1\r\nHost: h\r\nContent-Length: 4\r\n\r\nwxyz\
            \r\nGET /c HTTP/1.0\r\n\r\n";
        let limits = Limits::default();
        let mut buf = input;
        let mut seen = Vec::new();
        while !buf.is_empty() {
            let (head, n) = parse_request_head(buf, &limits).unwrap().unwrap();
            buf = &buf[n..];
            let mut body = Vec::new();
            let mut trailers = None;
            match head.framing {
                BodyFraming::Empty | BodyFraming::UntilClose => {}
                BodyFraming::Length(len) => {
                    body.extend_from_slice(&buf[..len as usize]);
                    buf = &buf[len as usize..];
                }
                BodyFraming::Chunked => {
                    let mut dec = ChunkedDecoder::new(DEFAULT_MAX_TRAILER_BYTES);
                    loop {
                        let (n, d) = dec.decode(buf).unwrap();
                        buf = &buf[n..];
                        match d {
                            Decoded::Data(d) => body.extend_from_slice(d),
                            Decoded::Done(t) => {
                                trailers = t;
                                break;
                            }
                            Decoded::NeedMore => panic!("body incomplete"),
                        }
                    }
                }
            }
            seen.push((
                head.method,
                head.uri.to_string(),
                head.keep_alive,
                body,
                trailers,
            ));
        }
        assert_eq!(seen.len(), 3);
        assert_eq!(seen[0].0, Method::POST);
        assert_eq!(seen[0].3, b"abcde");
        assert_eq!(seen[0].4.as_ref().unwrap()["x-t"], "1");
        assert_eq!(
            (seen[1].1.as_str(), seen[1].3.as_slice()),
            ("/b", &b"wxyz"[..])
        );
        // The stray CRLF after the PUT body is skipped as a leading empty line.
        assert_eq!((seen[2].1.as_str(), seen[2].2), ("/c", false));
    }

    #[test]
    fn response_for_http10_request() {
        let (head, _) = parse_request_head(
            b"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
            &Limits::default(),
        )
        .unwrap()
        .unwrap();
        let headers = HeaderMap::new();
        let framing = framing_for(false, StatusCode::OK, None, head.version);
        assert_eq!(framing, ResponseFraming::UntilClose);
        let keep_alive = head.keep_alive && !response_wants_close(&headers);
        let mut out = Vec::new();
        encode_head(
            head.version,
            StatusCode::OK,
            &headers,
            &framing,
            keep_alive,
            b"",
            &mut out,
        );
        assert_eq!(out, b"HTTP/1.1 200 OK\r\nconnection: close\r\n\r\n");
        let framing = framing_for(false, StatusCode::OK, Some(2), head.version);
        let mut out = Vec::new();
        encode_head(
            head.version,
            StatusCode::OK,
            &headers,
            &framing,
            keep_alive,
            b"",
            &mut out,
        );
        assert_eq!(
            out,
            b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: keep-alive\r\n\r\n"
        );
        assert_eq!(head.version, Version::HTTP_10);
    }
}
