//! Kubernetes label selectors: parsing, conversion from `LabelSelector`, matching.
