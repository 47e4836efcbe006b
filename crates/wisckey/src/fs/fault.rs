//! Stub: replaced by the real implementation.
#[derive(Debug, Default)]
pub struct FaultFs;
#[derive(Debug)]
pub enum FaultKind {}
#[derive(Debug)]
pub enum FaultOps {}
