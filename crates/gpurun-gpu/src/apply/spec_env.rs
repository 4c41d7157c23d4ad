//! The container's environment in a spec, edited by key: the GPU plan's
//! variables and the runtime's own (`run --gpus`) go through here.

use oci_spec::runtime::Spec;

/// Sets `KEY=VALUE` entries in the container's environment, replacing any
/// earlier value of the same key.
pub fn set_env(spec: &mut Spec, entries: &[String]) {
    if entries.is_empty() {
        return;
    }
    if let Some(process) = spec.process_mut() {
        let mut env = process.env().clone().unwrap_or_default();
        for kv in entries {
            let key = kv.split('=').next().unwrap_or_default();
            env.retain(|e| e.split('=').next() != Some(key));
            env.push(kv.clone());
        }
        process.set_env(Some(env));
    }
}
