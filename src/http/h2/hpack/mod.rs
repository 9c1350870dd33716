//! HPACK (RFC 7541): header compression for HTTP/2.
