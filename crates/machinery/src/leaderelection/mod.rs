//! Lease-based leader election with client-go's algorithm.
