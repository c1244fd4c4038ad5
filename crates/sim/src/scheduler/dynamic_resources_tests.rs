//! Unit tests of the DynamicResources plugin.
