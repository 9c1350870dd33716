//! How values become bodies and back. Nothing on the wire names the codec, so both sides
//! agree out of band; Go's arpc sends bytes and strings raw and JSON-encodes the rest.

use super::error::Error;
use bytes::Bytes;

/// Encodes `T` into a body and decodes one back.
pub trait Codec<T> {
    /// The body for `value`.
    fn encode(&self, value: &T) -> Result<Bytes, Error>;
    /// The value in `body`.
    fn decode(&self, body: &Bytes) -> Result<T, Error>;
}

/// Bodies as they are: bytes, or UTF-8 text (Go's `[]byte` and `string`).
#[derive(Clone, Copy, Debug, Default)]
pub struct Raw;

impl Codec<Bytes> for Raw {
    fn encode(&self, value: &Bytes) -> Result<Bytes, Error> {
        Ok(value.clone())
    }
    fn decode(&self, body: &Bytes) -> Result<Bytes, Error> {
        Ok(body.clone())
    }
}

impl Codec<Vec<u8>> for Raw {
    fn encode(&self, value: &Vec<u8>) -> Result<Bytes, Error> {
        Ok(Bytes::copy_from_slice(value))
    }
    fn decode(&self, body: &Bytes) -> Result<Vec<u8>, Error> {
        Ok(body.to_vec())
    }
}

impl Codec<String> for Raw {
    fn encode(&self, value: &String) -> Result<Bytes, Error> {
        Ok(Bytes::copy_from_slice(value.as_bytes()))
    }
    fn decode(&self, body: &Bytes) -> Result<String, Error> {
        String::from_utf8(body.to_vec()).map_err(|e| Error::Codec(e.to_string()))
    }
}

/// JSON through serde (Go's `encoding/json`, arpc's default codec).
#[derive(Clone, Copy, Debug, Default)]
pub struct Json;

impl<T: serde::Serialize + serde::de::DeserializeOwned> Codec<T> for Json {
    fn encode(&self, value: &T) -> Result<Bytes, Error> {
        serde_json::to_vec(value)
            .map(Bytes::from)
            .map_err(|e| Error::Codec(e.to_string()))
    }
    fn decode(&self, body: &Bytes) -> Result<T, Error> {
        serde_json::from_slice(body).map_err(|e| Error::Codec(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_is_plain_serde_json_and_raw_is_the_bytes() {
        let v = serde_json::json!({"a": 20, "b": 22});
        let b = Json.encode(&v).unwrap();
        assert_eq!(&b[..], br#"{"a":20,"b":22}"#);
        let n: i64 = Json.decode(&Bytes::from_static(b"42")).unwrap();
        assert_eq!(n, 42);
        assert!(Codec::<i64>::decode(&Json, &Bytes::from_static(b"nope")).is_err());
        let s: String = Raw.decode(&Bytes::from_static("你好".as_bytes())).unwrap();
        assert_eq!(s, "你好");
        assert!(Codec::<String>::decode(&Raw, &Bytes::from_static(b"\xff")).is_err());
    }
}
