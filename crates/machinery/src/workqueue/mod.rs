//! The work queue: fair, de-duplicating, delaying and rate-limited (client-go `util/workqueue`).
