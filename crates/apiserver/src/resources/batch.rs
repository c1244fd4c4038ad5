//! batch/v1 jobs and cronjobs (behaviour in [`job`](crate::resources::job) and [`cronjob`](crate::resources::cronjob)).

use k8s_openapi::api::batch::v1::{CronJob, Job};

use crate::registry::generation::Generation;
use crate::registry::resource::{ResourceDef, SelectableField};
use crate::registry::subresource::Subresource;
use crate::resources::cronjob::{CronJobStrategy, decode_cron_job};
use crate::resources::job::{JobStrategy, decode_job};
use crate::strategic_merge::kinds;
use crate::table::printers;

/// batch/v1 jobs.
pub static JOBS: ResourceDef = ResourceDef::of::<Job>()
    .generation(Generation::Spec)
    .categories(&["all"])
    .subresources(&[Subresource::Status])
    .fields(&[SelectableField {
        name: "status.successful",
        pointer: "/status/succeeded",
        default: "0",
        fallback: "",
    }])
    .decode_with(decode_job)
    .strategy(&JobStrategy)
    .printer(printers::JOB)
    .merge_schema(&kinds::TEMPLATED_WORKLOAD);

/// batch/v1 cronjobs.
pub static CRONJOBS: ResourceDef = ResourceDef::of::<CronJob>()
    .generation(Generation::Spec)
    .short_names(&["cj"])
    .categories(&["all"])
    .subresources(&[Subresource::Status])
    .decode_with(decode_cron_job)
    .strategy(&CronJobStrategy)
    .printer(printers::CRON_JOB)
    .merge_schema(&kinds::CRON_JOB);
