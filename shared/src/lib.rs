//! Shared protocol and gates.
