//! One pass over an HPA: upstream's `reconcileAutoscaler`, `computeReplicasForMetrics`, `computeStatusForResourceMetricGeneric`, `setStatus` and `updateStatusIfNeeded` (horizontal.go).

use std::sync::{Arc, PoisonError};

use jiff::Timestamp;
use k8s_openapi::api::autoscaling::v1::Scale;
use k8s_openapi::api::autoscaling::v2::{
    ContainerResourceMetricStatus, HorizontalPodAutoscaler, HorizontalPodAutoscalerCondition,
    HorizontalPodAutoscalerStatus, MetricSpec, MetricStatus, MetricTarget, MetricValueStatus,
    ResourceMetricStatus,
};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kcm_machinery::events::EventType;
use kcm_machinery::informer::index::NAMESPACE_INDEX;
use kcm_machinery::informer::keys::split_meta_namespace_key;
use kcm_machinery::labels::Selector;
use kube::Resource;

use super::controller::HorizontalController;
use super::normalize::{
    normalize_with_behavior, normalize_without_behavior, record_initial_recommendation,
    store_scale_event,
};
use super::quantity::milli_value;
use super::{Error, Result};

const ABLE_TO_SCALE: &str = "AbleToScale";
const SCALING_ACTIVE: &str = "ScalingActive";
const SCALING_LIMITED: &str = "ScalingLimited";

/// Why one metric gave no replica count: the `ScalingActive=False` reason and the error.
struct MetricFailure {
    reason: &'static str,
    error: String,
}

/// What one metric proposes.
struct Proposal {
    replicas: i32,
    metric_name: String,
    timestamp: Timestamp,
    status: MetricStatus,
}

/// What all metrics propose, as the return values of upstream's `computeReplicasForMetrics`:
/// `replicas` is -1 when no metric may be acted on.
struct MetricsOutcome {
    replicas: i32,
    metric_name: String,
    statuses: Vec<MetricStatus>,
    error: Option<String>,
}

/// Sets (or adds) a condition, moving its transition time only when its status changes, as
/// upstream's `setConditionInList`.
fn set_condition(
    hpa: &mut HorizontalPodAutoscaler,
    type_: &str,
    status: bool,
    reason: &str,
    message: String,
    now: Timestamp,
) {
    let status_str = if status { "True" } else { "False" };
    let conditions = hpa
        .status
        .get_or_insert_with(Default::default)
        .conditions
        .get_or_insert_with(Vec::new);
    let index = match conditions.iter().position(|c| c.type_ == type_) {
        Some(i) => i,
        None => {
            conditions.push(HorizontalPodAutoscalerCondition {
                type_: type_.to_owned(),
                ..Default::default()
            });
            conditions.len() - 1
        }
    };
    let condition = &mut conditions[index];
    if condition.status != status_str {
        condition.last_transition_time = Some(Time(now));
    }
    condition.status = status_str.to_owned();
    condition.reason = Some(reason.to_owned());
    condition.message = Some(message);
}

/// A milli-value as a quantity, as `resource.NewMilliQuantity(v, DecimalSI)` prints it.
fn milli_quantity(milli: i64) -> Quantity {
    if milli % 1000 != 0 {
        return Quantity(format!("{milli}m"));
    }
    let mut value = milli / 1000;
    for suffix in ["", "k", "M", "G", "T", "P"] {
        if value == 0 || value % 1000 != 0 || suffix == "P" {
            return Quantity(format!("{value}{suffix}"));
        }
        value /= 1000;
    }
    Quantity(format!("{value}E"))
}

impl HorizontalController {
    /// Reconciles the HPA under `key`; `Ok(true)` when it no longer exists (upstream's
    /// `reconcileKey`).
    pub async fn sync(&self, key: &str) -> Result<bool> {
        split_meta_namespace_key(key).map_err(|source| Error::InvalidKey {
            key: key.to_owned(),
            source,
        })?;
        let Some(shared) = self.hpa_cache.get_by_key(key) else {
            tracing::debug!(hpa = key, "Horizontal Pod Autoscaler has been deleted");
            self.history
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(key);
            return Ok(true);
        };
        self.reconcile_autoscaler(key, &shared).await?;
        Ok(false)
    }

    fn event(
        &self,
        hpa: &HorizontalPodAutoscaler,
        type_: EventType,
        reason: &str,
        message: String,
    ) {
        self.recorder
            .event(&hpa.object_ref(&()), type_, reason, message);
    }

    /// As upstream's `reconcileAutoscaler`.
    async fn reconcile_autoscaler(
        &self,
        key: &str,
        shared: &Arc<HorizontalPodAutoscaler>,
    ) -> Result<()> {
        let mut hpa = HorizontalPodAutoscaler::clone(shared);
        let original = hpa.status.clone();
        let now = (self.clock)();
        let namespace = hpa.metadata.namespace.clone().unwrap_or_default();
        let spec = hpa.spec.clone();
        let target = &spec.scale_target_ref;
        let reference = format!("{}/{namespace}/{}", target.kind, target.name);

        let mut scale = match self.client.get_scale(&namespace, target).await {
            Ok(scale) => scale,
            Err(source) => {
                self.event(
                    &hpa,
                    EventType::Warning,
                    "FailedGetScale",
                    source.to_string(),
                );
                set_condition(
                    &mut hpa,
                    ABLE_TO_SCALE,
                    false,
                    "FailedGetScale",
                    format!(
                        "the HPA controller was unable to get the target's current scale: {source}"
                    ),
                    now,
                );
                self.update_status_if_needed(original.as_ref(), &hpa)
                    .await?;
                return Err(Error::GetScale { reference, source });
            }
        };
        set_condition(
            &mut hpa,
            ABLE_TO_SCALE,
            true,
            "SucceededGetScale",
            "the HPA controller was able to get the target's current scale".to_owned(),
            now,
        );
        let current = scale.spec.as_ref().and_then(|s| s.replicas).unwrap_or(0);
        {
            let mut history = self.history.lock().unwrap_or_else(PoisonError::into_inner);
            record_initial_recommendation(history.entry(key.to_owned()).or_default(), current, now);
        }

        let min = spec.min_replicas.unwrap_or(1);
        let max = spec.max_replicas;
        let mut desired = 0;
        let mut rescale_reason = String::new();
        let mut statuses = Vec::new();
        let mut rescale = true;
        let mut deferred_error = None;

        if current == 0 && min != 0 {
            rescale = false;
            set_condition(
                &mut hpa,
                SCALING_ACTIVE,
                false,
                "ScalingDisabled",
                "scaling is disabled since the replica count of the target is zero".to_owned(),
                now,
            );
        } else if current > max {
            rescale_reason = "Current number of replicas above Spec.MaxReplicas".to_owned();
            desired = max;
        } else if current < min {
            rescale_reason = "Current number of replicas below Spec.MinReplicas".to_owned();
            desired = min;
        } else {
            let outcome = self
                .compute_replicas_for_metrics(
                    &mut hpa,
                    &scale,
                    spec.metrics.as_deref().unwrap_or_default(),
                    now,
                )
                .await;
            statuses = outcome.statuses;
            if let Some(message) = outcome.error.clone()
                && outcome.replicas == -1
            {
                set_status(&mut hpa, current, None, statuses, false, now);
                self.update_status_if_needed(original.as_ref(), &hpa)
                    .await?;
                self.event(
                    &hpa,
                    EventType::Warning,
                    "FailedComputeMetricsReplicas",
                    message.clone(),
                );
                return Err(Error::ComputeReplicas { reference, message });
            }
            deferred_error = outcome.error;
            let mut rescale_metric = String::new();
            if outcome.replicas > desired {
                desired = outcome.replicas;
                rescale_metric = outcome.metric_name;
            }
            if desired > current {
                rescale_reason = format!("{rescale_metric} above target");
            }
            if desired < current {
                rescale_reason = "All metrics below target".to_owned();
            }
            // Read the clock again: the metrics calls may have taken a while, and the
            // recommendation is made now (upstream calls time.Now() here).
            let now = (self.clock)();
            let normalized = {
                let mut history = self.history.lock().unwrap_or_else(PoisonError::into_inner);
                let history = history.entry(key.to_owned()).or_default();
                tracing::trace!(hpa = key, ?history, "Recommendations before this pass");
                match spec.behavior.as_ref() {
                    None => normalize_without_behavior(
                        history,
                        self.options.downscale_stabilization,
                        current,
                        desired,
                        min,
                        max,
                        now,
                    ),
                    Some(behavior) => normalize_with_behavior(
                        history,
                        behavior,
                        self.options.downscale_stabilization,
                        current,
                        desired,
                        min,
                        max,
                        now,
                    ),
                }
            };
            let (reason, message) = normalized.able_to_scale;
            set_condition(
                &mut hpa,
                ABLE_TO_SCALE,
                true,
                reason,
                message.to_owned(),
                now,
            );
            let (reason, message) = normalized.scaling_limited;
            set_condition(
                &mut hpa,
                SCALING_LIMITED,
                normalized.limited,
                reason,
                message.to_owned(),
                now,
            );
            tracing::debug!(
                hpa = key,
                current,
                proposed = desired,
                normalized = normalized.replicas,
                able_to_scale = normalized.able_to_scale.0,
                limited = normalized.scaling_limited.0,
                "Normalized the desired replicas"
            );
            desired = normalized.replicas;
            rescale = desired != current;
        }

        if rescale {
            scale.spec.get_or_insert_with(Default::default).replicas = Some(desired);
            if let Err(source) = self.client.update_scale(&namespace, target, &scale).await {
                self.event(
                    &hpa,
                    EventType::Warning,
                    "FailedRescale",
                    format!("New size: {desired}; reason: {rescale_reason}; error: {source}"),
                );
                set_condition(
                    &mut hpa,
                    ABLE_TO_SCALE,
                    false,
                    "FailedUpdateScale",
                    format!("the HPA controller was unable to update the target scale: {source}"),
                    now,
                );
                set_status(&mut hpa, current, None, statuses, false, now);
                self.update_status_if_needed(original.as_ref(), &hpa)
                    .await?;
                return Err(Error::Rescale { reference, source });
            }
            set_condition(
                &mut hpa,
                ABLE_TO_SCALE,
                true,
                "SucceededRescale",
                format!("the HPA controller was able to update the target scale to {desired}"),
                now,
            );
            self.event(
                &hpa,
                EventType::Normal,
                "SuccessfulRescale",
                format!("New size: {desired}; reason: {rescale_reason}"),
            );
            {
                let mut history = self.history.lock().unwrap_or_else(PoisonError::into_inner);
                store_scale_event(
                    history.entry(key.to_owned()).or_default(),
                    spec.behavior.as_ref(),
                    current,
                    desired,
                    now,
                );
            }
            tracing::info!(
                hpa = key,
                current,
                desired,
                reason = rescale_reason,
                "Successfully rescaled"
            );
        } else {
            desired = current;
        }

        set_status(&mut hpa, current, Some(desired), statuses, rescale, now);
        self.update_status_if_needed(original.as_ref(), &hpa)
            .await?;
        match deferred_error {
            Some(message) => Err(Error::ComputeReplicas { reference, message }),
            None => Ok(()),
        }
    }

    /// The pods of `namespace` that `selector` matches, from the cache.
    fn pods_matching(&self, namespace: &str, selector: &Selector) -> Vec<Arc<Pod>> {
        let pods = self
            .pod_cache
            .by_index(NAMESPACE_INDEX, namespace)
            .unwrap_or_else(|_| {
                self.pod_cache
                    .list()
                    .into_iter()
                    .filter(|p| p.metadata.namespace.as_deref() == Some(namespace))
                    .collect()
            });
        pods.into_iter()
            .filter(|p| selector.matches_opt(p.metadata.labels.as_ref()))
            .collect()
    }

    /// As upstream's `computeReplicasForMetrics`: the largest proposal of the valid
    /// metrics; -1 when every metric failed, or some failed and the rest would scale down.
    async fn compute_replicas_for_metrics(
        &self,
        hpa: &mut HorizontalPodAutoscaler,
        scale: &Scale,
        metric_specs: &[MetricSpec],
        now: Timestamp,
    ) -> MetricsOutcome {
        let failed = |error: String| MetricsOutcome {
            replicas: -1,
            metric_name: String::new(),
            statuses: Vec::new(),
            error: Some(error),
        };
        let selector_str = scale
            .status
            .as_ref()
            .and_then(|s| s.selector.clone())
            .unwrap_or_default();
        if selector_str.is_empty() {
            let message = "selector is required".to_owned();
            self.event(hpa, EventType::Warning, "SelectorRequired", message.clone());
            set_condition(
                hpa,
                SCALING_ACTIVE,
                false,
                "InvalidSelector",
                "the HPA target's scale is missing a selector".to_owned(),
                now,
            );
            return failed(message);
        }
        let selector = match Selector::parse(&selector_str) {
            Ok(selector) => selector,
            Err(err) => {
                let message = format!(
                    "couldn't convert selector into a corresponding internal selector object: {err}"
                );
                self.event(hpa, EventType::Warning, "InvalidSelector", message.clone());
                set_condition(
                    hpa,
                    SCALING_ACTIVE,
                    false,
                    "InvalidSelector",
                    message.clone(),
                    now,
                );
                return failed(message);
            }
        };
        let namespace = hpa.metadata.namespace.clone().unwrap_or_default();
        let spec_replicas = scale.spec.as_ref().and_then(|s| s.replicas).unwrap_or(0);
        let pods = self.pods_matching(&namespace, &selector);

        let mut replicas = 0;
        let mut metric_name = String::new();
        let mut statuses = Vec::new();
        let mut invalid = 0usize;
        let mut first_failure: Option<MetricFailure> = None;
        for spec in metric_specs {
            match self
                .compute_replicas_for_metric(
                    spec,
                    spec_replicas,
                    &namespace,
                    &selector_str,
                    &pods,
                    now,
                )
                .await
            {
                Ok(proposal) => {
                    statuses.push(proposal.status);
                    if replicas == 0 || proposal.replicas > replicas {
                        let _ = proposal.timestamp;
                        replicas = proposal.replicas;
                        metric_name = proposal.metric_name;
                    }
                }
                Err(failure) => {
                    self.event(
                        hpa,
                        EventType::Warning,
                        failure.reason,
                        failure.error.clone(),
                    );
                    if first_failure.is_none() {
                        first_failure = Some(failure);
                    }
                    invalid += 1;
                }
            }
        }
        let error = first_failure.as_ref().map(|f| {
            format!(
                "invalid metrics ({invalid} invalid out of {}), first error is: {}",
                metric_specs.len(),
                f.error
            )
        });
        if let Some(failure) = &first_failure
            && (invalid >= metric_specs.len() || replicas < spec_replicas)
        {
            set_condition(
                hpa,
                SCALING_ACTIVE,
                false,
                failure.reason,
                format!(
                    "the HPA was unable to compute the replica count: {}",
                    failure.error
                ),
                now,
            );
            return MetricsOutcome {
                replicas: -1,
                metric_name: String::new(),
                statuses,
                error,
            };
        }
        set_condition(
            hpa,
            SCALING_ACTIVE,
            true,
            "ValidMetricFound",
            format!(
                "the HPA was able to successfully calculate a replica count from {metric_name}"
            ),
            now,
        );
        MetricsOutcome {
            replicas,
            metric_name,
            statuses,
            error,
        }
    }

    /// One metric's proposal, as upstream's `computeReplicasForMetric`.
    async fn compute_replicas_for_metric(
        &self,
        spec: &MetricSpec,
        spec_replicas: i32,
        namespace: &str,
        selector: &str,
        pods: &[Arc<Pod>],
        now: Timestamp,
    ) -> Result<Proposal, MetricFailure> {
        let unavailable = |reason: &'static str, what: &str, api: &str| MetricFailure {
            reason,
            error: format!(
                "{what}: kcm serves no {api}, so only Resource and ContainerResource metrics can be computed"
            ),
        };
        match spec.type_.as_str() {
            "Resource" => {
                let Some(source) = spec.resource.as_ref() else {
                    return Err(invalid_source("Resource"));
                };
                let (replicas, metric_name, timestamp, current) = self
                    .resource_proposal(
                        &source.name,
                        None,
                        &source.target,
                        spec_replicas,
                        namespace,
                        selector,
                        pods,
                        now,
                    )
                    .await
                    .map_err(|error| MetricFailure {
                        reason: "FailedGetResourceMetric",
                        error,
                    })?;
                Ok(Proposal {
                    replicas,
                    metric_name,
                    timestamp,
                    status: MetricStatus {
                        type_: "Resource".into(),
                        resource: Some(ResourceMetricStatus {
                            name: source.name.clone(),
                            current,
                        }),
                        ..Default::default()
                    },
                })
            }
            "ContainerResource" => {
                let Some(source) = spec.container_resource.as_ref() else {
                    return Err(invalid_source("ContainerResource"));
                };
                let (replicas, metric_name, timestamp, current) = self
                    .resource_proposal(
                        &source.name,
                        Some(&source.container),
                        &source.target,
                        spec_replicas,
                        namespace,
                        selector,
                        pods,
                        now,
                    )
                    .await
                    .map_err(|error| MetricFailure {
                        reason: "FailedGetContainerResourceMetric",
                        error,
                    })?;
                Ok(Proposal {
                    replicas,
                    metric_name,
                    timestamp,
                    status: MetricStatus {
                        type_: "ContainerResource".into(),
                        container_resource: Some(ContainerResourceMetricStatus {
                            name: source.name.clone(),
                            container: source.container.clone(),
                            current,
                        }),
                        ..Default::default()
                    },
                })
            }
            "Pods" => {
                let name = spec
                    .pods
                    .as_ref()
                    .map(|p| p.metric.name.as_str())
                    .unwrap_or_default();
                Err(unavailable(
                    "FailedGetPodsMetric",
                    &format!("failed to get pods metric value: unable to get metric {name}"),
                    "custom metrics API (custom.metrics.k8s.io)",
                ))
            }
            "Object" => {
                let name = spec
                    .object
                    .as_ref()
                    .map(|o| o.metric.name.as_str())
                    .unwrap_or_default();
                Err(unavailable(
                    "FailedGetObjectMetric",
                    &format!("failed to get object metric value: unable to get metric {name}"),
                    "custom metrics API (custom.metrics.k8s.io)",
                ))
            }
            "External" => {
                let name = spec
                    .external
                    .as_ref()
                    .map(|e| e.metric.name.as_str())
                    .unwrap_or_default();
                Err(unavailable(
                    "FailedGetExternalMetric",
                    &format!(
                        "failed to get external metric value: unable to get external metric {namespace}/{name}"
                    ),
                    "external metrics API (external.metrics.k8s.io)",
                ))
            }
            other => Err(MetricFailure {
                reason: "InvalidMetricSourceType",
                error: format!("unknown metric source type {other:?}"),
            }),
        }
    }

    /// As upstream's `computeStatusForResourceMetricGeneric`: an AverageValue target goes
    /// through the raw calculation, an AverageUtilization one through the utilization one.
    #[allow(clippy::too_many_arguments)]
    async fn resource_proposal(
        &self,
        resource: &str,
        container: Option<&str>,
        target: &MetricTarget,
        spec_replicas: i32,
        namespace: &str,
        selector: &str,
        pods: &[Arc<Pod>],
        now: Timestamp,
    ) -> std::result::Result<(i32, String, Timestamp, MetricValueStatus), String> {
        let fetch = || async {
            self.metrics
                .resource_metric(resource, namespace, selector, container)
                .await
                .map_err(|e| format!("unable to get metrics for resource {resource}: {e}"))
        };
        let calc = &self.options.calculator;
        if let Some(average) = target.average_value.as_ref() {
            let wrap = |e: String| format!("failed to get {resource} usage: {e}");
            let target_milli = milli_value(&average.0)
                .ok_or_else(|| wrap(format!("invalid average value {:?}", average.0)))?;
            let (metrics, timestamp) = fetch().await.map_err(wrap)?;
            let proposal = calc
                .raw_resource_replicas(spec_replicas, target_milli, resource, pods, metrics, now)
                .map_err(|e| wrap(e.to_string()))?;
            return Ok((
                proposal.replicas,
                format!("{resource} resource"),
                timestamp,
                MetricValueStatus {
                    average_value: Some(milli_quantity(proposal.usage)),
                    ..Default::default()
                },
            ));
        }
        let Some(utilization) = target.average_utilization else {
            return Err("invalid resource metric source: neither an average utilization target nor an average value (usage) target was set".to_owned());
        };
        let wrap = |e: String| format!("failed to get {resource} utilization: {e}");
        let (metrics, timestamp) = fetch().await.map_err(wrap)?;
        let proposal = calc
            .resource_replicas(
                spec_replicas,
                utilization,
                resource,
                container,
                pods,
                metrics,
                now,
            )
            .map_err(|e| wrap(e.to_string()))?;
        let name = if container.is_some() {
            format!("{resource} container resource utilization (percentage of request)")
        } else {
            format!("{resource} resource utilization (percentage of request)")
        };
        Ok((
            proposal.replicas,
            name,
            timestamp,
            MetricValueStatus {
                average_utilization: Some(proposal.utilization),
                average_value: Some(milli_quantity(proposal.raw_utilization)),
                ..Default::default()
            },
        ))
    }

    /// Writes the status when it changed, as upstream's `updateStatusIfNeeded`.
    async fn update_status_if_needed(
        &self,
        original: Option<&HorizontalPodAutoscalerStatus>,
        hpa: &HorizontalPodAutoscaler,
    ) -> Result<()> {
        if original == hpa.status.as_ref() {
            return Ok(());
        }
        if let Err(source) = self.client.update_status(hpa).await {
            self.event(
                hpa,
                EventType::Warning,
                "FailedUpdateStatus",
                source.to_string(),
            );
            return Err(Error::UpdateStatus {
                hpa: format!(
                    "{}/{}",
                    hpa.metadata.namespace.as_deref().unwrap_or_default(),
                    hpa.metadata.name.as_deref().unwrap_or_default()
                ),
                source,
            });
        }
        Ok(())
    }
}

/// A metric whose source is missing for its type.
fn invalid_source(type_: &str) -> MetricFailure {
    MetricFailure {
        reason: "InvalidMetricSourceType",
        error: format!("invalid metric source: the {type_} source is not set"),
    }
}

/// As upstream's `setStatus` (`desired` `None` keeps the current desired count, as
/// `setCurrentReplicasAndMetricsInStatus`).
fn set_status(
    hpa: &mut HorizontalPodAutoscaler,
    current: i32,
    desired: Option<i32>,
    statuses: Vec<MetricStatus>,
    rescale: bool,
    now: Timestamp,
) {
    let status = hpa.status.get_or_insert_with(Default::default);
    status.current_replicas = Some(current);
    if let Some(desired) = desired {
        status.desired_replicas = desired;
    }
    status.current_metrics = (!statuses.is_empty()).then_some(statuses);
    if rescale {
        status.last_scale_time = Some(Time(now));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn milli_quantities_print_as_decimal_si() {
        let cases = [
            (500, "500m"),
            (2000, "2"),
            (1_500, "1500m"),
            (0, "0"),
            (3_000_000, "3k"),
        ];
        for (milli, want) in cases {
            assert_eq!(milli_quantity(milli).0, want, "{milli}");
        }
    }
}
