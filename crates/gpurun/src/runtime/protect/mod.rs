//! What keeps a container from the runtime and the host: the protected
//! re-exec (CVE-2019-5736), the exec stub, and the privilege a caller has.

pub mod exec_stub;
pub mod privilege;
pub mod seal;
