pub mod args;
pub mod handler;
