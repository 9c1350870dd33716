//! The loop's table of registered sources, indexed by token.
//!
//! A token is a slot index in its low 32 bits and the slot's generation in its high 32.
//! Freeing a slot bumps its generation, so a late event for a closed descriptor (whose
//! slot and fd number may already be reused) finds a stale token and is dropped.

pub(crate) struct Slab<T> {
    slots: Vec<Slot<T>>,
    free: Vec<u32>,
    len: usize,
}

struct Slot<T> {
    generation: u32,
    value: Option<T>,
}

impl<T> Slab<T> {
    pub fn new() -> Slab<T> {
        Slab {
            slots: Vec::new(),
            free: Vec::new(),
            len: 0,
        }
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Stores `value` and returns its token.
    pub fn insert(&mut self, value: T) -> u64 {
        self.len += 1;
        let index = match self.free.pop() {
            Some(i) => i,
            None => {
                self.slots.push(Slot {
                    generation: 0,
                    value: None,
                });
                (self.slots.len() - 1) as u32
            }
        };
        let slot = &mut self.slots[index as usize];
        slot.value = Some(value);
        token(index, slot.generation)
    }

    pub fn get(&self, token: u64) -> Option<&T> {
        let (index, generation) = split(token);
        let slot = self.slots.get(index as usize)?;
        if slot.generation != generation {
            return None;
        }
        slot.value.as_ref()
    }

    /// Frees the slot if `token` is still current.
    pub fn remove(&mut self, token: u64) -> Option<T> {
        let (index, generation) = split(token);
        let slot = self.slots.get_mut(index as usize)?;
        if slot.generation != generation {
            return None;
        }
        let value = slot.value.take()?;
        slot.generation = slot.generation.wrapping_add(1);
        self.free.push(index);
        self.len -= 1;
        Some(value)
    }

    pub fn iter(&self) -> impl Iterator<Item = &T> {
        self.slots.iter().filter_map(|s| s.value.as_ref())
    }

    /// Takes every value out, leaving the table empty.
    pub fn drain(&mut self) -> Vec<T> {
        self.free.clear();
        self.len = 0;
        let out = self
            .slots
            .iter_mut()
            .filter_map(|s| s.value.take())
            .collect();
        self.slots.clear();
        out
    }
}

fn token(index: u32, generation: u32) -> u64 {
    (u64::from(generation) << 32) | u64::from(index)
}

fn split(token: u64) -> (u32, u32) {
    (token as u32, (token >> 32) as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stale_tokens_miss_after_reuse() {
        let mut s = Slab::new();
        let a = s.insert("a");
        assert_eq!(s.get(a), Some(&"a"));
        assert_eq!(s.remove(a), Some("a"));
        let b = s.insert("b");
        assert_eq!(b as u32, a as u32, "slot reused");
        assert_ne!(a, b, "with a new generation");
        assert_eq!(s.get(a), None);
        assert_eq!(s.remove(a), None);
        assert_eq!(s.get(b), Some(&"b"));
        assert_eq!(s.len(), 1);
    }
}
