//! HTTP/2 frames (RFC 9113 §4 and §6): parsing from a round's buffer and writing into the
//! output buffer.
