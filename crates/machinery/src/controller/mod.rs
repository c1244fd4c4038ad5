//! Controller utilities from kubernetes `pkg/controller`: expectations, ref manager, pod control, ranking, slow start.
