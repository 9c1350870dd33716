//! The SETTINGS values (§6.5.2) and their validation.

use super::*;

/// SETTINGS values (§6.5.2) with their defaults; [`Settings::apply`] validates and applies
/// one SETTINGS frame's params. `None` is unlimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Settings {
    pub header_table_size: u32,
    pub enable_push: bool,
    pub max_concurrent_streams: Option<u32>,
    pub initial_window_size: u32,
    pub max_frame_size: u32,
    pub max_header_list_size: Option<u32>,
    /// RFC 8441 (extended CONNECT).
    pub enable_connect_protocol: bool,
}

impl Default for Settings {
    /// The RFC's initial values (§6.5.2), what holds before the peer's SETTINGS.
    fn default() -> Self {
        Settings {
            header_table_size: DEFAULT_HEADER_TABLE_SIZE,
            enable_push: true,
            max_concurrent_streams: None,
            initial_window_size: DEFAULT_INITIAL_WINDOW_SIZE,
            max_frame_size: DEFAULT_MAX_FRAME_SIZE,
            max_header_list_size: None,
            enable_connect_protocol: false,
        }
    }
}

impl Settings {
    /// Validates and applies one SETTINGS frame's params in order (§6.5.3: a later value
    /// for the same id wins). All or nothing: on an error `self` is unchanged.
    pub(crate) fn apply(&mut self, params: SettingsParams<'_>) -> Result<(), FrameError> {
        let mut next = *self;
        for (id, value) in params {
            next.apply_one(id, value)?;
        }
        *self = next;
        Ok(())
    }

    /// Validates and applies one parameter; unknown ids are ignored (§6.5.2).
    pub(crate) fn apply_one(&mut self, id: u16, value: u32) -> Result<(), FrameError> {
        use ErrorCode as E;
        match id {
            SETTINGS_HEADER_TABLE_SIZE => self.header_table_size = value,
            SETTINGS_ENABLE_PUSH => {
                self.enable_push = match value {
                    0 => false,
                    1 => true,
                    _ => return Err(conn(E::PROTOCOL_ERROR, "SETTINGS_ENABLE_PUSH not 0 or 1")),
                }
            }
            SETTINGS_MAX_CONCURRENT_STREAMS => self.max_concurrent_streams = Some(value),
            SETTINGS_INITIAL_WINDOW_SIZE => {
                if value > MAX_WINDOW {
                    return Err(conn(
                        E::FLOW_CONTROL_ERROR,
                        "SETTINGS_INITIAL_WINDOW_SIZE over 2^31-1",
                    ));
                }
                self.initial_window_size = value;
            }
            SETTINGS_MAX_FRAME_SIZE => {
                if !(DEFAULT_MAX_FRAME_SIZE..=MAX_MAX_FRAME_SIZE).contains(&value) {
                    return Err(conn(
                        E::PROTOCOL_ERROR,
                        "SETTINGS_MAX_FRAME_SIZE outside 2^14..=2^24-1",
                    ));
                }
                self.max_frame_size = value;
            }
            SETTINGS_MAX_HEADER_LIST_SIZE => self.max_header_list_size = Some(value),
            SETTINGS_ENABLE_CONNECT_PROTOCOL => {
                self.enable_connect_protocol = match value {
                    0 => false,
                    1 => true,
                    _ => {
                        return Err(conn(
                            E::PROTOCOL_ERROR,
                            "SETTINGS_ENABLE_CONNECT_PROTOCOL not 0 or 1",
                        ))
                    }
                }
            }
            _ => {}
        }
        Ok(())
    }
}
