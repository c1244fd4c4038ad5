//! Server-side printing: `meta.k8s.io/v1` Tables for `kubectl get`.
//!
//! kubectl asks for `application/json;as=Table;v=v1;g=meta.k8s.io` and prints the
//! columns the server chose. These are upstream's (`pkg/printers/internalversion`): the
//! same headers, the same cell text (pod STATUS and RESTARTS, node ROLES, ages as
//! `duration.HumanDuration`), priority-1 columns for `-o wide`. As upstream's server does,
//! every row carries the wide cells; kubectl hides priority-1 columns unless asked.
//!
//! Start with [`table_for`] and a resource's [`Printer`] (its entry names one from
//! [`printers`]); one-row tables per watch event come from calling it with one object.

mod admission;
mod autoscaling;
mod cluster;
mod columns;
mod control_plane;
mod core;
pub(crate) mod docs;
pub mod duration;
mod fields;
mod labels;
mod networking;
mod pod;
pub mod printers;
mod rbac;
mod resource;
mod storage;
mod workloads;

pub use columns::Column;

use jiff::Timestamp;
use serde_json::{Map, Value, json};

/// What each row's `object` holds (the `includeObject` table option).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum IncludeObject {
    /// No object.
    None,
    /// The object's metadata as a `meta.k8s.io/v1` `PartialObjectMetadata` (the default).
    #[default]
    Metadata,
    /// The whole object.
    Object,
}

impl IncludeObject {
    /// Parses the `includeObject` query parameter (`None`, `Metadata`, `Object`); empty
    /// means the default.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "None" => Some(IncludeObject::None),
            "" | "Metadata" => Some(IncludeObject::Metadata),
            "Object" => Some(IncludeObject::Object),
            _ => None,
        }
    }
}

/// One table row before the object is attached.
#[derive(Debug)]
pub(crate) struct Row {
    /// One cell per column definition, in order.
    cells: Vec<Value>,
    /// `conditions` of the row (pods that completed), if any.
    conditions: Option<Value>,
}

impl Row {
    fn new(cells: Vec<Value>) -> Self {
        Row {
            cells,
            conditions: None,
        }
    }
}

type RowFn = fn(&Value, Timestamp) -> Row;

/// The printer of one kind: its columns and how to fill a row. The kinds' printers are in
/// [`printers`].
#[derive(Clone, Copy)]
pub struct Printer {
    /// The column definitions, in order.
    columns: &'static [Column],
    /// One row: one cell per column.
    row: RowFn,
}

impl std::fmt::Debug for Printer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.columns.iter().map(|c| c.name).collect();
        f.debug_struct("Printer").field("columns", &names).finish()
    }
}

impl Printer {
    /// NAME and CREATED AT, for kinds without a printer (upstream's default convertor).
    pub const GENERIC: Printer = Printer::new(columns::GENERIC, generic_row);

    /// A printer of `columns` whose rows `row` fills.
    pub(crate) const fn new(columns: &'static [Column], row: RowFn) -> Self {
        Self { columns, row }
    }

    /// The column definitions its tables have.
    pub fn columns(&self) -> &'static [Column] {
        self.columns
    }
}

/// Name and creation time (RFC 3339, UTC, Go's zero time when unset), as upstream's
/// `rest.DefaultTableConvertor`.
fn generic_row(obj: &Value, _now: Timestamp) -> Row {
    let created = fields::time_at(obj, &["metadata", "creationTimestamp"])
        .map(crate::object::format_time)
        .unwrap_or_else(|| "0001-01-01T00:00:00Z".to_owned());
    Row::new(vec![json!(fields::name(obj)), json!(created)])
}

impl Column {
    /// The column as a `TableColumnDefinition` JSON object.
    pub fn to_json(&self) -> Value {
        json!({
            "name": self.name,
            "type": self.ty,
            "format": self.format,
            "description": self.description,
            "priority": self.priority,
        })
    }
}

/// The `meta.k8s.io/v1` Table of `objects`, all printed by `printer`. Ages are computed
/// against `now`.
///
/// The table's `metadata` is empty: the caller sets `resourceVersion` and `continue` from
/// its list. For the `noHeaders` option, the caller drops `columnDefinitions`.
pub fn table_for(
    printer: Printer,
    objects: &[Value],
    include_object: IncludeObject,
    now: Timestamp,
) -> Value {
    let columns: Vec<Value> = printer.columns.iter().map(Column::to_json).collect();
    let rows = objects.iter().map(|obj| {
        let row = (printer.row)(obj, now);
        debug_assert_eq!(row.cells.len(), printer.columns.len(), "{printer:?}");
        (row.cells, row.conditions)
    });
    assemble(columns, rows, objects, include_object)
}

/// The Table of `objects` whose column definitions (`TableColumnDefinition` JSON) and cells
/// were computed elsewhere: a custom resource's printer columns, from its CRD.
pub fn table_of_cells(
    columns: Vec<Value>,
    cells: impl Iterator<Item = Vec<Value>>,
    objects: &[Value],
    include_object: IncludeObject,
) -> Value {
    assemble(columns, cells.map(|c| (c, None)), objects, include_object)
}

/// A Table from its column definitions and one `(cells, conditions)` per object.
fn assemble(
    columns: Vec<Value>,
    rows: impl Iterator<Item = (Vec<Value>, Option<Value>)>,
    objects: &[Value],
    include_object: IncludeObject,
) -> Value {
    let rows: Vec<Value> = rows
        .zip(objects)
        .map(|((cells, conditions), obj)| {
            let mut out = Map::new();
            out.insert("cells".to_owned(), Value::Array(cells));
            if let Some(conditions) = conditions {
                out.insert("conditions".to_owned(), conditions);
            }
            match include_object {
                IncludeObject::None => {}
                IncludeObject::Metadata => {
                    out.insert("object".to_owned(), partial_object_metadata(obj));
                }
                IncludeObject::Object => {
                    out.insert("object".to_owned(), obj.clone());
                }
            }
            Value::Object(out)
        })
        .collect();
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {},
        "columnDefinitions": columns,
        "rows": rows,
    })
}

/// The object's metadata as a `meta.k8s.io/v1` `PartialObjectMetadata`.
fn partial_object_metadata(obj: &Value) -> Value {
    json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": obj.get("metadata").cloned().unwrap_or_else(|| json!({})),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> Timestamp {
        "2024-05-01T12:00:00Z".parse().expect("now")
    }

    fn headers(table: &Value, wide: bool) -> Vec<String> {
        table["columnDefinitions"]
            .as_array()
            .expect("columns")
            .iter()
            .filter(|c| wide || c["priority"] == 0)
            .map(|c| c["name"].as_str().expect("name").to_uppercase())
            .collect()
    }

    #[test]
    fn headers_match_kubectl_output() {
        struct Case {
            printer: Printer,
            headers: &'static str,
            wide: &'static str,
        }
        let cases = [
            Case {
                printer: printers::POD,
                headers: "NAME READY STATUS RESTARTS AGE",
                wide: "NAME READY STATUS RESTARTS AGE IP NODE NOMINATED NODE READINESS GATES",
            },
            Case {
                printer: printers::REPLICA_SET,
                headers: "NAME DESIRED CURRENT READY AGE",
                wide: "NAME DESIRED CURRENT READY AGE CONTAINERS IMAGES SELECTOR",
            },
            Case {
                printer: printers::DEPLOYMENT,
                headers: "NAME READY UP-TO-DATE AVAILABLE AGE",
                wide: "NAME READY UP-TO-DATE AVAILABLE AGE CONTAINERS IMAGES SELECTOR",
            },
            Case {
                printer: printers::NODE,
                headers: "NAME STATUS ROLES AGE VERSION",
                wide: "NAME STATUS ROLES AGE VERSION INTERNAL-IP EXTERNAL-IP OS-IMAGE KERNEL-VERSION CONTAINER-RUNTIME",
            },
            Case {
                printer: printers::NAMESPACE,
                headers: "NAME STATUS AGE",
                wide: "NAME STATUS AGE",
            },
            Case {
                printer: printers::EVENT,
                headers: "LAST SEEN TYPE REASON OBJECT MESSAGE",
                wide: "LAST SEEN TYPE REASON OBJECT SUBOBJECT SOURCE MESSAGE FIRST SEEN COUNT NAME",
            },
            Case {
                printer: printers::LEASE,
                headers: "NAME HOLDER AGE",
                wide: "NAME HOLDER AGE",
            },
            Case {
                printer: printers::SERVICE,
                headers: "NAME TYPE CLUSTER-IP EXTERNAL-IP PORT(S) AGE",
                wide: "NAME TYPE CLUSTER-IP EXTERNAL-IP PORT(S) AGE SELECTOR",
            },
            Case {
                printer: printers::CONFIG_MAP,
                headers: "NAME DATA AGE",
                wide: "NAME DATA AGE",
            },
            Case {
                printer: printers::SECRET,
                headers: "NAME TYPE DATA AGE",
                wide: "NAME TYPE DATA AGE",
            },
            Case {
                printer: printers::DAEMON_SET,
                headers: "NAME DESIRED CURRENT READY UP-TO-DATE AVAILABLE NODE SELECTOR AGE",
                wide: "NAME DESIRED CURRENT READY UP-TO-DATE AVAILABLE NODE SELECTOR AGE CONTAINERS IMAGES SELECTOR",
            },
            Case {
                printer: printers::STATEFUL_SET,
                headers: "NAME READY AGE",
                wide: "NAME READY AGE CONTAINERS IMAGES",
            },
            Case {
                printer: printers::POD_DISRUPTION_BUDGET,
                headers: "NAME MIN AVAILABLE MAX UNAVAILABLE ALLOWED DISRUPTIONS AGE",
                wide: "NAME MIN AVAILABLE MAX UNAVAILABLE ALLOWED DISRUPTIONS AGE",
            },
            Case {
                printer: printers::SERVICE_ACCOUNT,
                headers: "NAME SECRETS AGE",
                wide: "NAME SECRETS AGE",
            },
            Case {
                printer: printers::ENDPOINTS,
                headers: "NAME ENDPOINTS AGE",
                wide: "NAME ENDPOINTS AGE",
            },
            Case {
                printer: printers::JOB,
                headers: "NAME STATUS COMPLETIONS DURATION AGE",
                wide: "NAME STATUS COMPLETIONS DURATION AGE CONTAINERS IMAGES SELECTOR",
            },
            Case {
                printer: printers::ROLE_BINDING,
                headers: "NAME ROLE AGE",
                wide: "NAME ROLE AGE USERS GROUPS SERVICEACCOUNTS",
            },
            Case {
                printer: printers::INGRESS,
                headers: "NAME CLASS HOSTS ADDRESS PORTS AGE",
                wide: "NAME CLASS HOSTS ADDRESS PORTS AGE",
            },
            Case {
                printer: printers::INGRESS_CLASS,
                headers: "NAME CONTROLLER PARAMETERS AGE",
                wide: "NAME CONTROLLER PARAMETERS AGE",
            },
            Case {
                printer: printers::NETWORK_POLICY,
                headers: "NAME POD-SELECTOR AGE",
                wide: "NAME POD-SELECTOR AGE",
            },
            Case {
                printer: printers::SERVICE_CIDR,
                headers: "NAME CIDRS AGE",
                wide: "NAME CIDRS AGE",
            },
            Case {
                printer: printers::IP_ADDRESS,
                headers: "NAME PARENTREF",
                wide: "NAME PARENTREF",
            },
            Case {
                printer: printers::STORAGE_CLASS,
                headers: "NAME PROVISIONER RECLAIMPOLICY VOLUMEBINDINGMODE ALLOWVOLUMEEXPANSION AGE",
                wide: "NAME PROVISIONER RECLAIMPOLICY VOLUMEBINDINGMODE ALLOWVOLUMEEXPANSION AGE",
            },
            Case {
                printer: printers::CSI_DRIVER,
                headers: "NAME ATTACHREQUIRED PODINFOONMOUNT STORAGECAPACITY TOKENREQUESTS REQUIRESREPUBLISH MODES AGE",
                wide: "NAME ATTACHREQUIRED PODINFOONMOUNT STORAGECAPACITY TOKENREQUESTS REQUIRESREPUBLISH MODES AGE",
            },
            Case {
                printer: printers::VOLUME_ATTACHMENT,
                headers: "NAME ATTACHER PV NODE ATTACHED AGE",
                wide: "NAME ATTACHER PV NODE ATTACHED AGE",
            },
            Case {
                printer: printers::CERTIFICATE_SIGNING_REQUEST,
                headers: "NAME AGE SIGNERNAME REQUESTOR REQUESTEDDURATION CONDITION",
                wide: "NAME AGE SIGNERNAME REQUESTOR REQUESTEDDURATION CONDITION",
            },
            Case {
                printer: printers::WEBHOOK_CONFIGURATION,
                headers: "NAME WEBHOOKS AGE",
                wide: "NAME WEBHOOKS AGE",
            },
            Case {
                printer: printers::FLOW_SCHEMA,
                headers: "NAME PRIORITYLEVEL MATCHINGPRECEDENCE DISTINGUISHERMETHOD AGE MISSINGPL",
                wide: "NAME PRIORITYLEVEL MATCHINGPRECEDENCE DISTINGUISHERMETHOD AGE MISSINGPL",
            },
            Case {
                printer: printers::PRIORITY_LEVEL_CONFIGURATION,
                headers: "NAME TYPE NOMINALCONCURRENCYSHARES QUEUES HANDSIZE QUEUELENGTHLIMIT AGE",
                wide: "NAME TYPE NOMINALCONCURRENCYSHARES QUEUES HANDSIZE QUEUELENGTHLIMIT AGE",
            },
            Case {
                printer: printers::API_SERVICE,
                headers: "NAME SERVICE AVAILABLE AGE",
                wide: "NAME SERVICE AVAILABLE AGE",
            },
            Case {
                printer: printers::GENERIC,
                headers: "NAME CREATED AT",
                wide: "NAME CREATED AT",
            },
            Case {
                printer: printers::PERSISTENT_VOLUME,
                headers: "NAME CAPACITY ACCESS MODES RECLAIM POLICY STATUS CLAIM STORAGECLASS VOLUMEATTRIBUTESCLASS REASON AGE",
                wide: "NAME CAPACITY ACCESS MODES RECLAIM POLICY STATUS CLAIM STORAGECLASS VOLUMEATTRIBUTESCLASS REASON AGE VOLUMEMODE",
            },
            Case {
                printer: printers::PERSISTENT_VOLUME_CLAIM,
                headers: "NAME STATUS VOLUME CAPACITY ACCESS MODES STORAGECLASS VOLUMEATTRIBUTESCLASS AGE",
                wide: "NAME STATUS VOLUME CAPACITY ACCESS MODES STORAGECLASS VOLUMEATTRIBUTESCLASS AGE VOLUMEMODE",
            },
            Case {
                printer: printers::RESOURCE_QUOTA,
                headers: "NAME AGE REQUEST LIMIT",
                wide: "NAME AGE REQUEST LIMIT",
            },
            Case {
                printer: printers::COMPONENT_STATUS,
                headers: "NAME STATUS MESSAGE ERROR",
                wide: "NAME STATUS MESSAGE ERROR",
            },
            Case {
                printer: printers::HORIZONTAL_POD_AUTOSCALER,
                headers: "NAME REFERENCE TARGETS MINPODS MAXPODS REPLICAS AGE",
                wide: "NAME REFERENCE TARGETS MINPODS MAXPODS REPLICAS AGE",
            },
            Case {
                printer: printers::RUNTIME_CLASS,
                headers: "NAME HANDLER AGE",
                wide: "NAME HANDLER AGE",
            },
            Case {
                printer: printers::CRON_JOB,
                headers: "NAME SCHEDULE TIMEZONE SUSPEND ACTIVE LAST SCHEDULE AGE",
                wide: "NAME SCHEDULE TIMEZONE SUSPEND ACTIVE LAST SCHEDULE AGE CONTAINERS IMAGES SELECTOR",
            },
            Case {
                printer: printers::REPLICATION_CONTROLLER,
                headers: "NAME DESIRED CURRENT READY AGE",
                wide: "NAME DESIRED CURRENT READY AGE CONTAINERS IMAGES SELECTOR",
            },
        ];
        for case in cases {
            let table = table_for(case.printer, &[], IncludeObject::Metadata, now());
            assert_eq!(
                headers(&table, false).join(" "),
                case.headers,
                "{:?}",
                case.printer
            );
            assert_eq!(
                headers(&table, true).join(" "),
                case.wide,
                "{:?} wide",
                case.printer
            );
        }
    }

    #[test]
    fn every_printer_fills_every_column() {
        let obj = json!({"metadata": {"name": "x", "creationTimestamp": "2024-05-01T11:00:00Z"}});
        for (name, printer) in printers::ALL {
            let table = table_for(
                *printer,
                std::slice::from_ref(&obj),
                IncludeObject::None,
                now(),
            );
            let cells = table["rows"][0]["cells"].as_array().expect("cells").len();
            assert_eq!(cells, printer.columns().len(), "{name}");
        }
    }

    #[test]
    fn table_shape_and_row_objects() {
        let rs = json!({
            "apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": "web-1", "namespace": "default", "resourceVersion": "7",
                         "creationTimestamp": "2024-05-01T11:59:00Z"},
            "spec": {"replicas": 2}, "status": {"replicas": 2, "readyReplicas": 2}
        });
        let table = table_for(
            printers::REPLICA_SET,
            std::slice::from_ref(&rs),
            IncludeObject::Metadata,
            now(),
        );
        assert_eq!(table["kind"], "Table");
        assert_eq!(table["apiVersion"], "meta.k8s.io/v1");
        assert_eq!(
            table["columnDefinitions"][0],
            json!({"name": "Name", "type": "string", "format": "name",
                   "description": docs::NAME, "priority": 0})
        );
        assert_eq!(
            table["rows"][0]["cells"],
            json!(["web-1", 2, 2, 2, "60s", "", "", "<none>"])
        );
        assert_eq!(
            table["rows"][0]["object"],
            json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                   "metadata": rs["metadata"]})
        );
        let full = table_for(
            printers::REPLICA_SET,
            std::slice::from_ref(&rs),
            IncludeObject::Object,
            now(),
        );
        assert_eq!(full["rows"][0]["object"], rs);
        let none = table_for(printers::REPLICA_SET, &[rs], IncludeObject::None, now());
        assert!(none["rows"][0].get("object").is_none());
    }

    #[test]
    fn generic_rows_print_the_creation_time_as_upstreams_default_convertor() {
        let role =
            json!({"metadata": {"name": "reader", "creationTimestamp": "2024-05-01T11:00:00Z"}});
        let table = table_for(printers::GENERIC, &[role], IncludeObject::None, now());
        assert_eq!(
            table["rows"][0]["cells"],
            json!(["reader", "2024-05-01T11:00:00Z"])
        );
        assert_eq!(table["columnDefinitions"][1]["type"], "date");
        let unset = table_for(
            printers::GENERIC,
            &[json!({"metadata": {"name": "x"}})],
            IncludeObject::None,
            now(),
        );
        assert_eq!(unset["rows"][0]["cells"][1], "0001-01-01T00:00:00Z");
    }

    #[test]
    fn include_object_parses_the_query_values() {
        assert_eq!(IncludeObject::parse("None"), Some(IncludeObject::None));
        assert_eq!(IncludeObject::parse(""), Some(IncludeObject::Metadata));
        assert_eq!(IncludeObject::parse("Object"), Some(IncludeObject::Object));
        assert_eq!(IncludeObject::parse("everything"), None);
    }
}
