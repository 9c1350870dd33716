//! The one copy of a message head that its URI and header values are slices of.
//!
//! `Bytes::copy_from_slice` allocates the copy, and the first slice taken of it allocates
//! again (a `Vec`-backed `Bytes` becomes shared on its first clone): two allocations per
//! head. A head that fits one of a few fixed sizes instead goes into an inline buffer owned
//! by the `Bytes` (`Bytes::from_owner`): one allocation, and every slice a count increment.

use bytes::Bytes;

/// A head of up to `N` bytes, held inline.
struct Inline<const N: usize> {
    len: usize,
    buf: [u8; N],
}

impl<const N: usize> AsRef<[u8]> for Inline<N> {
    fn as_ref(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

fn inline<const N: usize>(head: &[u8]) -> Bytes {
    let mut owner = Inline {
        len: head.len(),
        buf: [0; N],
    };
    owner.buf[..head.len()].copy_from_slice(head);
    Bytes::from_owner(owner)
}

/// Copies `head` into a `Bytes` whose slices share it.
pub(crate) fn copy_head(head: &[u8]) -> Bytes {
    // Most requests' and responses' heads fit the first size (a load generator's or an
    // API client's) or the second (a browser's, cookies included).
    match head.len() {
        0..=256 => inline::<256>(head),
        257..=1024 => inline::<1024>(head),
        _ => Bytes::copy_from_slice(head),
    }
}

#[cfg(test)]
mod tests {
    use super::copy_head;

    #[test]
    fn every_size_copies_the_head_and_slices_share_it() {
        for len in [0, 1, 255, 256, 257, 1024, 1025, 70_000] {
            let head: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
            let copy = copy_head(&head);
            assert_eq!(&copy[..], &head[..], "len {len}");
            if len > 2 {
                let part = copy.slice(1..len - 1);
                assert_eq!(&part[..], &head[1..len - 1]);
                assert_eq!(part.as_ptr(), copy[1..].as_ptr(), "a slice copied");
                drop(copy);
                assert_eq!(&part[..], &head[1..len - 1], "the slice outlived its head");
            }
        }
    }
}
