//! `cordis session ...`: stored sessions, one file per subcommand.

pub mod compact;
pub mod export;
pub mod import;
pub mod ls;
pub mod show;
pub mod watch;
