//! What the log says when a handler panics.

use std::any::Any;

/// Logs that `what` panicked, with the panic's message. A handler that used tokio (its
/// timers, `spawn`, `fs`, tower-http's `ServeDir`) in a build without fibr's `tokio`
/// feature panics with tokio's "no reactor running" message; the log then names the fix,
/// since the client only sees a 500.
pub(super) fn log_panic(what: &str, payload: &(dyn Any + Send)) {
    let message = message(payload);
    if cfg!(not(feature = "tokio")) && is_missing_tokio(message) {
        tracing::error!(
            panic = message,
            "{what} panicked: it used tokio, and this fibr was built without its `tokio` \
             feature (on by default: do not turn default features off, or add \
             features = [\"tokio\"])"
        );
    } else {
        tracing::error!(panic = message, "{what} panicked");
    }
}

/// A panic payload's text (`panic!` gives a `&str` or a `String`).
fn message(payload: &(dyn Any + Send)) -> &str {
    match payload.downcast_ref::<&str>() {
        Some(s) => s,
        None => payload.downcast_ref::<String>().map_or("", String::as_str),
    }
}

/// Whether tokio panicked because no tokio runtime was entered.
fn is_missing_tokio(message: &str) -> bool {
    message.contains("Tokio 1.x runtime") || message.contains("no reactor running")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokios_missing_runtime_is_recognised() {
        let tokio = std::panic::catch_unwind(|| {
            panic!("there is no reactor running, must be called from the context of a Tokio 1.x runtime")
        })
        .unwrap_err();
        assert!(is_missing_tokio(message(&*tokio)));
        let other = std::panic::catch_unwind(|| panic!("index {} out of bounds", 3)).unwrap_err();
        assert_eq!(message(&*other), "index 3 out of bounds");
        assert!(!is_missing_tokio(message(&*other)));
    }
}
