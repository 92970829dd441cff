//! What a caller knows of a record (or an object) before it acts on it ([`Prior`]): a read
//! made before, a guess that nothing is there, or nothing yet.

/// What was known of a record before an update (or of an object before a decision): read as
/// it was, read (or guessed) absent, or not read. A compare-and-swap on a read version is as
/// safe as on a fresh one (it fails where the record changed since, and reads anew), and a
/// guess of absence is checked by the write only where nothing is.
#[derive(Debug, Clone, Default)]
pub(super) enum Prior<T> {
    /// Not read: whoever needs it reads it.
    #[default]
    Unread,
    /// Nothing there: as read, or guessed without a read (a first delivery's new record).
    Absent,
    /// There, as read.
    Read(T),
}

impl<T> Prior<T> {
    /// What a read found: [`Prior::Absent`] where nothing was.
    pub(super) fn of(read: Option<T>) -> Self {
        match read {
            Some(found) => Prior::Read(found),
            None => Prior::Absent,
        }
    }

    /// [`Prior::Absent`] where `absent` (a guess), else [`Prior::Unread`].
    pub(super) fn absent_if(absent: bool) -> Self {
        if absent {
            Prior::Absent
        } else {
            Prior::Unread
        }
    }

    /// What this holds, leaving [`Prior::Unread`] in its place (a read is used once).
    pub(super) fn take(&mut self) -> Self {
        std::mem::take(self)
    }

    /// What was read there, if anything was.
    pub(super) fn found(&self) -> Option<&T> {
        match self {
            Prior::Read(found) => Some(found),
            _ => None,
        }
    }
}
