//! Unit tests of the ResourceClaim controller.
