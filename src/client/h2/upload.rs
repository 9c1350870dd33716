//! A request body into DATA frames: the HTTP/2 connection task's `http::pump` sink.

use super::Local;
use crate::client::error::{BoxError, Error, ErrorKind, Failure};
use crate::http::pump::{pump, Pumped, Room, Sink};
use crate::proto::h2::client::ClientConn;
use crate::proto::h2::frame::ErrorCode;
use bytes::Bytes;
use http::HeaderMap;
use std::pin::Pin;
use std::task::Context;

/// Sends what the windows allow of one request body; returns whether anything went.
pub(super) fn upload(
    machine: &mut ClientConn,
    id: u32,
    l: &mut Local,
    out: &mut Vec<u8>,
    cx: &mut Context<'_>,
) -> bool {
    let Some(body) = l.body.as_mut() else {
        return false;
    };
    let mut sink = Upload {
        machine,
        id,
        unsent: &mut l.chunk,
        out,
        failed: None,
        progress: false,
    };
    // Polled even with the windows shut: one frame waits in `unsent`, and a body's end
    // (an empty END_STREAM, or trailers) needs no window.
    let pumped = pump(Pin::new(body), cx, &mut sink);
    let (progress, failed) = (sink.progress, sink.failed.take());
    if pumped == Pumped::Done {
        l.body = None;
        l.chunk = None;
    }
    if let Some(e) = failed {
        l.ended = true;
        l.slot
            .fail(Failure::Sent(Error::new(ErrorKind::RequestBody, e)));
    }
    progress || pumped == Pumped::Done
}

/// A request body's way into DATA frames, within the stream's windows.
struct Upload<'a> {
    machine: &'a mut ClientConn,
    id: u32,
    /// What the windows did not let out yet, and whether it ends the body.
    unsent: &'a mut Option<(Bytes, bool)>,
    out: &'a mut Vec<u8>,
    failed: Option<BoxError>,
    progress: bool,
}

impl Sink<Bytes> for Upload<'_> {
    fn ready(&mut self) -> Room {
        if !self.machine.is_sending(self.id) {
            // The stream was reset or answered early: the rest of the body is not wanted.
            return Room::Finished;
        }
        if let Some((mut data, last)) = self.unsent.take() {
            if !self.machine.send_data(self.id, &mut data, last, self.out) {
                *self.unsent = Some((data, last));
                return Room::Wait;
            }
            self.progress = true;
            if last {
                return Room::Finished;
            }
        }
        Room::Go
    }

    fn data(&mut self, mut data: Bytes, last: bool) -> bool {
        self.progress = true;
        if self.machine.send_data(self.id, &mut data, last, self.out) {
            return true;
        }
        *self.unsent = Some((data, last));
        false
    }

    fn trailers(&mut self, trailers: HeaderMap) {
        self.machine.send_trailers(self.id, &trailers, self.out);
    }

    fn end(&mut self) {
        self.machine
            .send_data(self.id, &mut Bytes::new(), true, self.out);
    }

    fn failed(&mut self, err: BoxError) {
        self.machine.reset(self.id, ErrorCode::CANCEL, self.out);
        self.failed = Some(err);
    }
}
