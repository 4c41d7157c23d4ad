use std::path::PathBuf;

use super::serialize::Variant;
use super::utils::SystemdClientError;

pub trait SystemdClient {
    fn is_system(&self) -> bool;

    fn transient_unit_exists(&self, unit_name: &str) -> bool;

    /// Asks systemd for the unit and returns the path of its start job:
    /// systemd replies before it runs the job (gpurun patch).
    fn start_transient_unit(
        &self,
        container_name: &str,
        pid: u32,
        parent: &str,
        unit_name: &str,
    ) -> Result<String, SystemdClientError>;

    /// gpurun patch: the result ("done", "failed", ...) of the job
    /// `start_transient_unit` returned, once systemd's JobRemoved signal
    /// for it comes; `None` if it has not come within `timeout`.
    fn wait_for_job(
        &self,
        job: &str,
        timeout: std::time::Duration,
    ) -> Result<Option<String>, SystemdClientError>;

    fn stop_transient_unit(&self, unit_name: &str) -> Result<(), SystemdClientError>;

    /// Sets the properties in the order given: systemd applies them in that
    /// order, and a property may come twice (an empty `DeviceAllow` resets
    /// the list before the new entries; gpurun patch).
    fn set_unit_properties(
        &self,
        unit_name: &str,
        properties: &[(&str, Variant)],
    ) -> Result<(), SystemdClientError>;

    fn systemd_version(&self) -> Result<u32, SystemdClientError>;

    fn control_cgroup_root(&self) -> Result<PathBuf, SystemdClientError>;

    fn add_process_to_unit(
        &self,
        unit_name: &str,
        subcgroup: &str,
        pid: u32,
    ) -> Result<(), SystemdClientError>;
}
