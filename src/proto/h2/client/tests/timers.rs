//! The machine's deadlines on a fake clock: keep-alive PINGs and the SETTINGS ACK timeout,
//! each at its bound.

use super::*;
use std::time::Duration;

const MS: Duration = Duration::from_millis(1);
const INTERVAL: Duration = Duration::from_secs(10);
const TIMEOUT: Duration = Duration::from_secs(5);

fn keep_alive(while_idle: bool) -> ClientConfig {
    ClientConfig {
        keep_alive_interval: Some(INTERVAL),
        keep_alive_timeout: TIMEOUT,
        keep_alive_while_idle: while_idle,
        ..ClientConfig::default()
    }
}

/// The PINGs in `out`: (ACK, data).
fn pings(out: &[u8]) -> Vec<(bool, [u8; 8])> {
    let mut pos = 0;
    let mut found = Vec::new();
    while let Ok(Some((f, used))) = frame::parse(&out[pos..], frame::MAX_MAX_FRAME_SIZE) {
        pos += used;
        if let Frame::Ping { ack, data } = f {
            found.push((ack, data));
        }
    }
    found
}

fn ack(data: [u8; 8]) -> Vec<u8> {
    let mut input = Vec::new();
    frame::write_ping(&mut input, true, data);
    input
}

fn timed_out(ev: &[Event], stream: u32) -> bool {
    ev.iter()
        .any(|e| matches!(e, Event::Reset { stream: s, why: Why::TimedOut(_) } if *s == stream))
}

#[test]
fn a_ping_goes_out_after_the_interval_without_frames_and_its_ack_clears_it() {
    let t0 = Instant::now();
    let (mut c, mut out, mut ev) = hand_made_with(&keep_alive(false), t0);
    open_get(&mut c, &mut out);
    out.clear();
    assert_eq!(
        c.poll_timers(t0 + INTERVAL - MS, &mut out, &mut ev),
        Some(t0 + INTERVAL)
    );
    assert!(out.is_empty());
    let sent = t0 + INTERVAL;
    assert_eq!(c.poll_timers(sent, &mut out, &mut ev), Some(sent + TIMEOUT));
    assert_eq!(pings(&out), vec![(false, frame::KEEP_ALIVE_PING)]);
    // While it is out, no second one.
    out.clear();
    assert_eq!(
        c.poll_timers(sent + MS, &mut out, &mut ev),
        Some(sent + TIMEOUT)
    );
    assert!(out.is_empty());
    let answered = sent + Duration::from_secs(1);
    c.receive(answered, &ack(frame::KEEP_ALIVE_PING), &mut out, &mut ev);
    assert_eq!(
        c.poll_timers(sent + TIMEOUT, &mut out, &mut ev),
        Some(answered + INTERVAL)
    );
    assert!(!c.is_failed() && ev.is_empty() && out.is_empty());
    assert_eq!(c.streams(), 1);
}

#[test]
fn an_unanswered_ping_fails_the_connection_and_its_streams_with_a_timeout() {
    let t0 = Instant::now();
    let (mut c, mut out, mut ev) = hand_made_with(&keep_alive(false), t0);
    let id = open_get(&mut c, &mut out);
    let sent = t0 + INTERVAL;
    c.poll_timers(sent, &mut out, &mut ev);
    // Neither an ACK of someone else's data nor other frames answer it.
    c.receive(sent + MS, &ack(*b"not ours"), &mut out, &mut ev);
    let mut input = Vec::new();
    frame::write_window_update(&mut input, 0, 1);
    c.receive(sent + MS, &input, &mut out, &mut ev);
    out.clear();
    assert_eq!(
        c.poll_timers(sent + TIMEOUT - MS, &mut out, &mut ev),
        Some(sent + TIMEOUT)
    );
    assert!(!c.is_failed() && ev.is_empty());
    assert_eq!(c.poll_timers(sent + TIMEOUT, &mut out, &mut ev), None);
    assert!(c.is_failed() && !c.is_usable());
    assert!(failed_with(&out, ErrorCode::NO_ERROR));
    assert!(timed_out(&ev, id), "{ev:?}");
    // Over: no more deadlines, nothing more written.
    out.clear();
    assert_eq!(c.poll_timers(sent + TIMEOUT * 2, &mut out, &mut ev), None);
    assert!(out.is_empty());
}

#[test]
fn anything_from_the_server_puts_the_ping_off() {
    let t0 = Instant::now();
    let (mut c, mut out, mut ev) = hand_made_with(&keep_alive(false), t0);
    open_get(&mut c, &mut out);
    let mut input = Vec::new();
    frame::write_window_update(&mut input, 0, 1);
    let heard = t0 + Duration::from_secs(8);
    // Half a frame is news too.
    c.receive(heard, &input[..3], &mut out, &mut ev);
    out.clear();
    assert_eq!(
        c.poll_timers(t0 + INTERVAL, &mut out, &mut ev),
        Some(heard + INTERVAL)
    );
    assert!(out.is_empty());
}

#[test]
fn an_idle_connection_is_pinged_only_with_while_idle() {
    let t0 = Instant::now();
    let (mut c, mut out, mut ev) = hand_made_with(&keep_alive(false), t0);
    out.clear();
    assert_eq!(c.poll_timers(t0 + INTERVAL * 100, &mut out, &mut ev), None);
    assert!(out.is_empty());
    let (mut c, mut out, mut ev) = hand_made_with(&keep_alive(true), t0);
    assert_eq!(
        c.poll_timers(t0 + INTERVAL, &mut out, &mut ev),
        Some(t0 + INTERVAL + TIMEOUT)
    );
    assert_eq!(pings(&out), vec![(false, frame::KEEP_ALIVE_PING)]);
}

#[test]
fn without_an_interval_there_are_no_pings() {
    let t0 = Instant::now();
    let (mut c, mut out, mut ev) = hand_made_with(&ClientConfig::default(), t0);
    open_get(&mut c, &mut out);
    out.clear();
    assert_eq!(
        c.poll_timers(t0 + Duration::from_secs(3600), &mut out, &mut ev),
        None
    );
    assert!(out.is_empty() && !c.is_failed());
}

#[test]
fn settings_unacknowledged_past_the_timeout_close_the_connection() {
    let t0 = Instant::now();
    let cfg = ClientConfig::default();
    let limit = cfg.settings_timeout;
    let mut out = Vec::new();
    let mut ev = Vec::new();
    let mut c = ClientConn::new(&cfg, t0, &mut out);
    let mut input = Vec::new();
    frame::write_settings(&mut input, &[]);
    c.receive(t0, &input, &mut out, &mut ev);
    let id = open_get(&mut c, &mut out);
    out.clear();
    assert_eq!(
        c.poll_timers(t0 + limit - MS, &mut out, &mut ev),
        Some(t0 + limit)
    );
    assert!(!c.is_failed());
    assert_eq!(c.poll_timers(t0 + limit, &mut out, &mut ev), None);
    assert!(c.is_failed() && failed_with(&out, ErrorCode::SETTINGS_TIMEOUT));
    assert!(timed_out(&ev, id), "{ev:?}");
    // Once ACKed, the deadline is gone.
    let (mut c, mut out, mut ev) = hand_made_with(&cfg, t0);
    assert_eq!(c.poll_timers(t0 + limit, &mut out, &mut ev), None);
    assert!(!c.is_failed());
}

#[test]
fn fibrs_server_machine_answers_the_ping() {
    let mut p = Pair::new(keep_alive(false), ServerConfig::default().h2_limits());
    let t0 = p.now;
    p.get("/");
    p.now = t0 + INTERVAL;
    let mut ev = Vec::new();
    let next = p.client.poll_timers(p.now, &mut p.to_server, &mut ev);
    assert_eq!(next, Some(t0 + INTERVAL + TIMEOUT));
    assert_eq!(pings(&p.to_server), vec![(false, frame::KEEP_ALIVE_PING)]);
    p.pump();
    let next = p.client.poll_timers(p.now, &mut p.to_server, &mut ev);
    assert_eq!(next, Some(p.now + INTERVAL), "the ACK came back");
    assert!(ev.is_empty() && !p.client.is_failed());
}
