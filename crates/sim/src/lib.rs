//! A scheduler and simulated nodes for kcm's embedded cluster.
