//! Stub: replaced by the real implementation.
#[derive(Debug, Default)]
pub struct PosixFs;
