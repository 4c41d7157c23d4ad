//! The pure parsers and writers, each unit-tested and fuzzed: ELF headers
//! and notes, `ld.so.cache`, device lists, the `NVIDIA_REQUIRE_*` language,
//! and each architecture's facts (multiarch directory, cache flags).

pub mod devlist;
pub mod elf;
pub mod ldcache;
pub mod platform;
pub mod require;
