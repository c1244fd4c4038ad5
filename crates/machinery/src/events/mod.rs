//! The core/v1 event recorder: broadcaster, correlator (aggregation, spam filter) and sink.
