pub mod k8s;
pub mod validate;
