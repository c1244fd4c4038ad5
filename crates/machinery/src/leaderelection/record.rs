//! The leader election record and its mapping onto a `coordination.k8s.io/v1` LeaseSpec.

use jiff::Timestamp;
use k8s_openapi::api::coordination::v1::LeaseSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;

/// What a lock stores about the current leader, as client-go's `resourcelock.LeaderElectionRecord`.
///
/// Electors never trust the timestamps in a record (they may come from another machine's clock);
/// they only notice that the record *changed* and time the lease on their own monotonic clock.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LeaderElectionRecord {
    /// The identity of the holder; empty when the lease is free (e.g. after a release).
    pub holder_identity: String,
    /// How long, in seconds, candidates must wait after the last observed change before taking over.
    pub lease_duration_seconds: i32,
    /// When the current holder acquired the lease.
    pub acquire_time: Option<Timestamp>,
    /// When the current holder last renewed the lease.
    pub renew_time: Option<Timestamp>,
    /// How many times the lease has changed hands.
    pub leader_transitions: i32,
}

impl LeaderElectionRecord {
    /// Reads a record from a LeaseSpec, as client-go's `LeaseSpecToLeaderElectionRecord`.
    /// Missing fields read as empty / zero.
    pub fn from_lease_spec(spec: &LeaseSpec) -> Self {
        Self {
            holder_identity: spec.holder_identity.clone().unwrap_or_default(),
            lease_duration_seconds: spec.lease_duration_seconds.unwrap_or_default(),
            acquire_time: spec.acquire_time.as_ref().map(|t| t.0),
            renew_time: spec.renew_time.as_ref().map(|t| t.0),
            leader_transitions: spec.lease_transitions.unwrap_or_default(),
        }
    }

    /// Writes the record as a LeaseSpec, as client-go's `LeaderElectionRecordToLeaseSpec`.
    /// The holder is always written (an empty string for a released lease).
    pub fn to_lease_spec(&self) -> LeaseSpec {
        LeaseSpec {
            holder_identity: Some(self.holder_identity.clone()),
            lease_duration_seconds: Some(self.lease_duration_seconds),
            acquire_time: self.acquire_time.map(MicroTime),
            renew_time: self.renew_time.map(MicroTime),
            lease_transitions: Some(self.leader_transitions),
            ..LeaseSpec::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lease_spec_round_trip_keeps_every_field() {
        let now: Timestamp = "2024-05-01T10:00:00.123456Z".parse().expect("timestamp");
        let spec = LeaseSpec {
            holder_identity: Some("foo".into()),
            lease_duration_seconds: Some(10),
            acquire_time: Some(MicroTime(now)),
            renew_time: Some(MicroTime(now)),
            lease_transitions: Some(1),
            ..LeaseSpec::default()
        };
        let record = LeaderElectionRecord::from_lease_spec(&spec);
        assert_eq!(record.holder_identity, "foo");
        assert_eq!(record.leader_transitions, 1);
        assert_eq!(record.to_lease_spec(), spec);
        assert_eq!(
            LeaderElectionRecord::from_lease_spec(&record.to_lease_spec()),
            record
        );
    }

    #[test]
    fn empty_spec_reads_as_free_lease() {
        let record = LeaderElectionRecord::from_lease_spec(&LeaseSpec::default());
        assert_eq!(record, LeaderElectionRecord::default());
        assert!(record.holder_identity.is_empty());
    }
}
