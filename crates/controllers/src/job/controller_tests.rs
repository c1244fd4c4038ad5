//! Unit tests of the Job controller: caches seeded directly, fake pod control and API, `sync(key)` called, actions counted — as upstream's `job_controller_test.go`.

use super::*;
