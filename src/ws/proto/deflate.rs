//! permessage-deflate (RFC 7692): negotiation and the per-message compressor.
