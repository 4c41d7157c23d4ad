//! What keeps a container from the runtime and the host: the protected
//! re-exec (CVE-2019-5736) and when a root `run` needs it, the exec stub,
//! the caller's leaked descriptors, whether a rootless container could
//! write the binary, and the privilege a caller has.

pub mod exec_stub;
pub mod inherited_fds;
pub mod privilege;
pub mod rootless_write;
pub mod seal;
pub mod stub_policy;
