//! Client plumbing: a client-side QPS/burst limiter and request metrics for `kube::Client`.
