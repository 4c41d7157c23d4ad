pub mod api;
pub mod args;
pub mod format;
pub mod handler;
pub mod utils;
