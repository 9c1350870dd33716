//! Session tickets every process holding one secret can open: [`SharedTicketer`] (its doc
//! says how).
//!
//! The crypto is ring's, whatever rustls provider the server's config has: only the servers
//! sharing the secret ever open a ticket, so no peer can tell, and `tls` always builds
//! ring (one code path, run by every build's tests).

use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_256_GCM, NONCE_LEN};
use ring::hkdf::{Prk, Salt, HKDF_SHA256};
use ring::rand::{SecureRandom, SystemRandom};
use rustls::server::ProducesTickets;
use std::fmt;
use std::sync::{Arc, OnceLock, RwLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// HKDF's salt: keys derived here are for this use only, whatever else the secret is for.
const SALT: &[u8] = b"fibr session ticket keys v1";
const PERIOD_LEN: usize = 8;
const TAG_LEN: usize = 16;
/// The longest ticket lifetime TLS 1.3 allows (RFC 8446, section 4.6.1).
const MAX_PERIOD: Duration = Duration::from_secs(7 * 24 * 60 * 60);

/// A [`ProducesTickets`] whose keys are derived from a secret and the time: every instance
/// made from the same secret and period seals and opens the same tickets. Put it in a
/// `ServerConfig`'s `ticketer`; [`Prefork`] makes one for its children by default
/// ([`Child::ticketer`]).
///
/// rustls's own ticketers rotate to a fresh random key each lifetime, a key only the
/// process that made it knows. Prefork children, or servers behind one load balancer,
/// then each issue tickets the others cannot open, and a client resumes only when it
/// lands where it got its ticket. Here a period's key is derived from a shared secret and
/// the period's number (HKDF-SHA256 over the wall clock divided by the period), so every
/// holder of the secret computes the same key at the same time without talking to the
/// others, and the keys still rotate.
///
/// A ticket is `period (8 bytes, big-endian) | nonce (12) | AES-256-GCM(state) | tag (16)`:
/// the period names the key, and is authenticated as the AEAD's associated data. Tickets
/// are sealed with the current period's key and opened with the current or the previous
/// one's, so a ticket lives at least one period and at most two; anything else (another
/// secret, older, altered, short) is refused, and the client does a full handshake.
///
/// The clocks of servers sharing a secret must agree (NTP is plenty): a ticket sealed
/// in a period another server does not take for its current or previous one gets a full
/// handshake there. Forward secrecy: a period's key is gone from memory once the period
/// is over, but the secret can derive it again, so whoever takes the secret can open the
/// tickets sealed with it and, with them, the sessions they resume. Make a new secret
/// from time to time (a supervisor's restart does, a new key file does).
///
/// [`Prefork`]: crate::prefork::Prefork
/// [`Child::ticketer`]: crate::prefork::Child::ticketer
pub struct SharedTicketer {
    prk: Prk,
    period: u64,
    rng: SystemRandom,
    /// The keys of the latest period seen (derived once per period, not per ticket).
    keys: RwLock<Option<Arc<Keys>>>,
}

/// A period's key and the one before it.
struct Keys {
    period: u64,
    current: LessSafeKey,
    previous: LessSafeKey,
}

impl SharedTicketer {
    /// How long a key seals tickets, and the lifetime tickets are given, unless changed by
    /// [`with_period`](Self::with_period): six hours, as rustls's own ticketer.
    pub const DEFAULT_PERIOD: Duration = Duration::from_secs(6 * 60 * 60);

    /// A ticketer with a new random secret (share it by making it before forking).
    pub fn new() -> Result<SharedTicketer, rustls::Error> {
        let mut secret = [0u8; 32];
        SystemRandom::new()
            .fill(&mut secret)
            .map_err(|_| rustls::Error::FailedToGetRandomBytes)?;
        Ok(SharedTicketer::from_secret(secret))
    }

    /// A ticketer with this secret: 32 random bytes kept as a key file is (servers on
    /// several machines given the same one open each other's tickets).
    pub fn from_secret(secret: [u8; 32]) -> SharedTicketer {
        SharedTicketer {
            prk: Salt::new(HKDF_SHA256, SALT).extract(&secret),
            period: Self::DEFAULT_PERIOD.as_secs(),
            rng: SystemRandom::new(),
            keys: RwLock::new(None),
        }
    }

    /// Rotates keys every `period` (whole seconds, from 1 s to 7 days), which is also the
    /// lifetime tickets are given: a ticket opens for one to two periods after it was
    /// sealed. Every server sharing the secret must use the same period.
    #[must_use]
    pub fn with_period(mut self, period: Duration) -> SharedTicketer {
        self.period = period.clamp(Duration::from_secs(1), MAX_PERIOD).as_secs();
        self.keys = RwLock::new(None);
        self
    }

    /// The key rotation period (and ticket lifetime).
    pub fn period(&self) -> Duration {
        Duration::from_secs(self.period)
    }

    /// The period the wall clock is in now.
    fn now(&self) -> u64 {
        let secs = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        secs / self.period
    }

    /// The keys for `period` and the one before it.
    fn keys(&self, period: u64) -> Option<Arc<Keys>> {
        if let Some(keys) = self.keys.read().unwrap_or_else(|e| e.into_inner()).as_ref() {
            if keys.period == period {
                return Some(keys.clone());
            }
        }
        let keys = Arc::new(Keys {
            period,
            current: self.key(period)?,
            previous: self.key(period.checked_sub(1)?)?,
        });
        *self.keys.write().unwrap_or_else(|e| e.into_inner()) = Some(keys.clone());
        Some(keys)
    }

    /// HKDF-SHA256(secret, period length and number) as an AES-256-GCM key: another
    /// period length never makes the same key.
    fn key(&self, period: u64) -> Option<LessSafeKey> {
        let (length, number) = (self.period.to_be_bytes(), period.to_be_bytes());
        let info: [&[u8]; 2] = [&length, &number];
        let okm = self.prk.expand(&info, &AES_256_GCM).ok()?;
        Some(LessSafeKey::new(UnboundKey::from(okm)))
    }

    /// Seals `plain` with the key of `period`.
    fn seal(&self, period: u64, plain: &[u8]) -> Option<Vec<u8>> {
        let keys = self.keys(period)?;
        let mut nonce = [0u8; NONCE_LEN];
        self.rng.fill(&mut nonce).ok()?;
        let name = period.to_be_bytes();
        let mut out = Vec::with_capacity(PERIOD_LEN + NONCE_LEN + plain.len() + TAG_LEN);
        out.extend_from_slice(&name);
        out.extend_from_slice(&nonce);
        out.extend_from_slice(plain);
        let tag = keys
            .current
            .seal_in_place_separate_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(name),
                &mut out[PERIOD_LEN + NONCE_LEN..],
            )
            .ok()?;
        out.extend_from_slice(tag.as_ref());
        Some(out)
    }

    /// Opens `ticket` if it was sealed in period `now` or the one before.
    fn open(&self, now: u64, ticket: &[u8]) -> Option<Vec<u8>> {
        if ticket.len() < PERIOD_LEN + NONCE_LEN + TAG_LEN {
            return None;
        }
        let (name, rest) = ticket.split_at(PERIOD_LEN);
        let (nonce, sealed) = rest.split_at(NONCE_LEN);
        let name: [u8; PERIOD_LEN] = name.try_into().ok()?;
        let period = u64::from_be_bytes(name);
        let keys = self.keys(now)?;
        let key = if period == now {
            &keys.current
        } else if period.checked_add(1) == Some(now) {
            &keys.previous
        } else {
            return None;
        };
        let nonce = Nonce::try_assume_unique_for_key(nonce).ok()?;
        let mut plain = sealed.to_vec();
        let len = key
            .open_in_place(nonce, Aad::from(name), &mut plain)
            .ok()?
            .len();
        plain.truncate(len);
        Some(plain)
    }
}

impl ProducesTickets for SharedTicketer {
    fn enabled(&self) -> bool {
        true
    }

    fn lifetime(&self) -> u32 {
        // At most 7 days (`with_period`), so it fits.
        self.period as u32
    }

    fn encrypt(&self, plain: &[u8]) -> Option<Vec<u8>> {
        self.seal(self.now(), plain)
    }

    fn decrypt(&self, cipher: &[u8]) -> Option<Vec<u8>> {
        self.open(self.now(), cipher)
    }
}

impl fmt::Debug for SharedTicketer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never the secret.
        f.debug_struct("SharedTicketer")
            .field("period", &self.period())
            .finish_non_exhaustive()
    }
}

/// The ticketer of this process's servers that were given none (a prefork child's).
static PROCESS_TICKETER: OnceLock<Arc<SharedTicketer>> = OnceLock::new();

/// Makes `ticketer` the one [`for_http`](super::for_http) gives a config without any:
/// a prefork child's `serve(..).with_tls(config)` shares its tickets with its siblings
/// (prefork is Linux's).
#[cfg(target_os = "linux")]
pub(crate) fn set_process_ticketer(ticketer: Arc<SharedTicketer>) {
    let _ = PROCESS_TICKETER.set(ticketer);
}

pub(crate) fn process_ticketer() -> Option<Arc<SharedTicketer>> {
    PROCESS_TICKETER.get().cloned()
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: [u8; 32] = [7; 32];
    const NOW: u64 = 1_000;

    #[test]
    fn a_sealed_ticket_opens() {
        let t = SharedTicketer::from_secret(SECRET);
        let ticket = t.seal(NOW, b"session state").unwrap();
        assert_eq!(t.open(NOW, &ticket).unwrap(), b"session state");
        assert_ne!(&ticket[PERIOD_LEN + NONCE_LEN..][..13], b"session state");
        // And through the trait, on the wall clock.
        let ticket = t.encrypt(b"").unwrap();
        assert_eq!(t.decrypt(&ticket).unwrap(), b"");
        assert!(t.enabled());
        assert_eq!(t.lifetime(), 6 * 60 * 60);
    }

    #[test]
    fn another_instance_with_the_same_secret_opens_it() {
        let issuer = SharedTicketer::from_secret(SECRET);
        let other = SharedTicketer::from_secret(SECRET);
        let ticket = issuer.seal(NOW, b"state").unwrap();
        assert_eq!(other.open(NOW, &ticket).unwrap(), b"state");
        let ticket = issuer.encrypt(b"state").unwrap();
        assert_eq!(other.decrypt(&ticket).unwrap(), b"state");
    }

    #[test]
    fn the_previous_period_opens_an_older_one_does_not() {
        let t = SharedTicketer::from_secret(SECRET);
        let ticket = t.seal(NOW, b"state").unwrap();
        // A fresh instance has no cached keys: it derives the previous period's.
        let later = SharedTicketer::from_secret(SECRET);
        assert_eq!(later.open(NOW + 1, &ticket).unwrap(), b"state");
        assert_eq!(t.open(NOW + 1, &ticket).unwrap(), b"state");
        assert_eq!(t.open(NOW + 2, &ticket), None, "two periods on");
        assert_eq!(
            t.open(NOW - 1, &ticket),
            None,
            "from a period not yet begun"
        );
        assert_eq!(
            t.open(NOW, &ticket).unwrap(),
            b"state",
            "the cache goes back"
        );
    }

    #[test]
    fn a_ticket_names_its_period_and_cannot_be_moved_to_another() {
        let t = SharedTicketer::from_secret(SECRET);
        let mut ticket = t.seal(NOW, b"state").unwrap();
        assert_eq!(ticket[..PERIOD_LEN], NOW.to_be_bytes());
        // Renamed to the current period, it fails authentication under that key.
        ticket[..PERIOD_LEN].copy_from_slice(&(NOW + 1).to_be_bytes());
        assert_eq!(t.open(NOW + 1, &ticket), None);
    }

    #[test]
    fn altered_short_or_garbage_tickets_are_refused() {
        let t = SharedTicketer::from_secret(SECRET);
        let ticket = t.seal(NOW, b"some session state").unwrap();
        for i in 0..ticket.len() {
            let mut bad = ticket.clone();
            bad[i] ^= 0x01;
            assert_eq!(t.open(NOW, &bad), None, "byte {i} flipped");
        }
        for len in 0..ticket.len() {
            assert_eq!(t.open(NOW, &ticket[..len]), None, "cut to {len}");
        }
        let mut longer = ticket.clone();
        longer.push(0);
        assert_eq!(t.open(NOW, &longer), None);
        assert_eq!(t.decrypt(&[]), None);
        assert_eq!(t.decrypt(&[0xff; 36]), None);
        assert_eq!(t.decrypt(&[0xff; 200]), None);
        let mut named = NOW.to_be_bytes().to_vec();
        named.extend_from_slice(&[0; 64]);
        assert_eq!(t.open(NOW, &named), None);
        assert_eq!(t.open(u64::MAX, &named), None);
        assert_eq!(
            t.open(0, &ticket),
            None,
            "the first period has no previous key"
        );
    }

    #[test]
    fn different_secrets_do_not_interoperate() {
        let a = SharedTicketer::from_secret(SECRET);
        let b = SharedTicketer::from_secret([8; 32]);
        assert_eq!(b.open(NOW, &a.seal(NOW, b"state").unwrap()), None);
        assert_eq!(a.open(NOW, &b.seal(NOW, b"state").unwrap()), None);
        let c = SharedTicketer::new().unwrap();
        let d = SharedTicketer::new().unwrap();
        assert_eq!(d.decrypt(&c.encrypt(b"state").unwrap()), None);
    }

    #[test]
    fn the_period_is_the_lifetime_and_is_bounded() {
        let t = SharedTicketer::from_secret(SECRET).with_period(Duration::from_millis(2500));
        assert_eq!(t.period(), Duration::from_secs(2));
        assert_eq!(t.lifetime(), 2);
        let t = SharedTicketer::from_secret(SECRET).with_period(Duration::ZERO);
        assert_eq!(t.lifetime(), 1);
        let t = SharedTicketer::from_secret(SECRET).with_period(Duration::MAX);
        assert_eq!(t.lifetime(), 604_800);
        assert_eq!(format!("{t:?}"), "SharedTicketer { period: 604800s, .. }");
        // The same secret and period number with another period length: other keys.
        let a = SharedTicketer::from_secret(SECRET).with_period(Duration::from_secs(60));
        let b = SharedTicketer::from_secret(SECRET).with_period(Duration::from_secs(61));
        assert_eq!(b.open(NOW, &a.seal(NOW, b"state").unwrap()), None);
    }
}
