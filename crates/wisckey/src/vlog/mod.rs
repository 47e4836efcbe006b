//! Stub: replaced by the real implementation.
