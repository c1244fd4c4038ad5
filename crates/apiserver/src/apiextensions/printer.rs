//! A custom resource version's `kubectl get` columns: NAME, then the CRD's `additionalPrinterColumns` (or AGE when it declares none), evaluated with JSONPath, as upstream's custom resource table convertor.

use jiff::Timestamp;
use jsonpath_rust::JsonPath;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceColumnDefinition;
use serde_json::{Value, json};

use super::is_simple_json_path;
use crate::table::{IncludeObject, docs, duration, table_of_cells};
use crate::validation::FieldError;

/// The column types upstream accepts.
const TYPES: [&str; 5] = ["integer", "number", "string", "boolean", "date"];
/// The column formats upstream accepts.
const FORMATS: [&str; 9] = [
    "int32",
    "int64",
    "float",
    "double",
    "byte",
    "date",
    "date-time",
    "password",
    "name",
];

/// One printer column.
#[derive(Clone, Debug)]
pub struct PrinterColumn {
    /// The header.
    pub name: String,
    /// `integer`, `number`, `string`, `boolean` or `date`.
    pub ty: String,
    /// The OpenAPI format hint.
    pub format: String,
    /// The description.
    pub description: String,
    /// 0, or more for `-o wide` only.
    pub priority: i32,
    /// The JSONPath (`.spec.replicas`), as `$.spec.replicas` for evaluation.
    pub path: String,
}

impl PrinterColumn {
    /// The column of a CRD's definition.
    pub fn of(def: &CustomResourceColumnDefinition) -> Self {
        PrinterColumn {
            name: def.name.clone(),
            ty: def.type_.clone(),
            format: def.format.clone().unwrap_or_default(),
            description: def.description.clone().unwrap_or_default(),
            priority: def.priority.unwrap_or(0),
            path: format!("${}", def.json_path),
        }
    }

    /// The AGE column upstream prints when a CRD declares none.
    pub fn age() -> Self {
        PrinterColumn {
            name: "Age".to_owned(),
            ty: "date".to_owned(),
            format: String::new(),
            description: docs::CREATION_TIMESTAMP.to_owned(),
            priority: 0,
            path: "$.metadata.creationTimestamp".to_owned(),
        }
    }

    fn definition(&self) -> Value {
        json!({"name": self.name, "type": self.ty, "format": self.format,
            "description": self.description, "priority": self.priority})
    }

    /// The cell of `obj`: `null` when the path finds nothing; dates as ages.
    fn cell(&self, obj: &Value, now: Timestamp) -> Value {
        let Ok(found) = obj.query(&self.path) else {
            return Value::Null;
        };
        let Some(value) = found.first().copied() else {
            return Value::Null;
        };
        match self.ty.as_str() {
            "string" => match value {
                Value::String(s) => json!(s),
                Value::Null => Value::Null,
                other => json!(other.to_string()),
            },
            "integer" => value
                .as_i64()
                .or_else(|| value.as_f64().map(|f| f as i64))
                .map_or(Value::Null, |i| json!(i)),
            "number" => value.as_f64().map_or(Value::Null, |f| json!(f)),
            "boolean" => value.as_bool().map_or(Value::Null, |b| json!(b)),
            "date" => value
                .as_str()
                .and_then(|s| s.parse::<Timestamp>().ok())
                .map_or(Value::Null, |t| json!(duration::since(Some(t), now))),
            _ => Value::Null,
        }
    }
}

/// The printer of one version.
#[derive(Clone, Debug)]
pub struct CustomPrinter {
    columns: Vec<PrinterColumn>,
}

impl CustomPrinter {
    /// NAME and the version's columns (AGE when there are none).
    pub fn new(defs: &[CustomResourceColumnDefinition]) -> Self {
        let columns = if defs.is_empty() {
            vec![PrinterColumn::age()]
        } else {
            defs.iter().map(PrinterColumn::of).collect()
        };
        CustomPrinter { columns }
    }

    /// The Table of `objects`.
    pub fn table(&self, objects: &[Value], include: IncludeObject, now: Timestamp) -> Value {
        let mut definitions = vec![json!({"name": "Name", "type": "string", "format": "name",
            "description": docs::NAME, "priority": 0})];
        definitions.extend(self.columns.iter().map(PrinterColumn::definition));
        let cells = objects.iter().map(|obj| {
            let mut row = vec![json!(crate::object::name(obj))];
            row.extend(self.columns.iter().map(|c| c.cell(obj, now)));
            row
        });
        table_of_cells(definitions, cells, objects, include)
    }
}

/// One column definition, as upstream's `ValidateCustomResourceColumnDefinition`.
pub fn validate_column(col: &CustomResourceColumnDefinition, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if col.name.is_empty() {
        errs.push(FieldError::required(format!("{path}.name"), ""));
    }
    if col.type_.is_empty() {
        errs.push(FieldError::required(format!("{path}.type"), ""));
    } else if !TYPES.contains(&col.type_.as_str()) {
        errs.push(FieldError::not_supported(
            format!("{path}.type"),
            col.type_.as_str(),
            &TYPES,
        ));
    }
    if let Some(format) = col.format.as_deref()
        && !format.is_empty()
        && !FORMATS.contains(&format)
    {
        errs.push(FieldError::not_supported(
            format!("{path}.format"),
            format,
            &FORMATS,
        ));
    }
    if col.priority.is_some_and(|p| p < 0) {
        errs.push(FieldError::invalid(
            format!("{path}.priority"),
            col.priority.unwrap_or(0),
            "must be greater than or equal to 0",
        ));
    }
    if col.json_path.is_empty() {
        errs.push(FieldError::required(format!("{path}.jsonPath"), ""));
    } else if !col.json_path.starts_with('.')
        || (!is_simple_json_path(&col.json_path)
            && json!({}).query(&format!("${}", col.json_path)).is_err())
    {
        errs.push(FieldError::invalid(
            format!("{path}.jsonPath"),
            col.json_path.as_str(),
            "must be a simple json path starting with .",
        ));
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;

    fn column(name: &str, ty: &str, path: &str) -> CustomResourceColumnDefinition {
        CustomResourceColumnDefinition {
            name: name.to_owned(),
            type_: ty.to_owned(),
            json_path: path.to_owned(),
            ..Default::default()
        }
    }

    #[test]
    fn columns_print_values_by_type_and_ages_for_dates() {
        let printer = CustomPrinter::new(&[
            column("Deployment", "string", ".spec.deploymentName"),
            column("Desired", "integer", ".spec.replicas"),
            column("Available", "integer", ".status.availableReplicas"),
            column(
                "Ready",
                "string",
                ".status.conditions[?(@.type==\"Ready\")].status",
            ),
            column("Age", "date", ".metadata.creationTimestamp"),
        ]);
        let foo = json!({"metadata": {"name": "x", "creationTimestamp": "2024-05-01T11:00:00Z"},
            "spec": {"deploymentName": "web", "replicas": 3},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]}});
        let now: Timestamp = "2024-05-01T12:00:00Z".parse().expect("now");
        let table = printer.table(&[foo], IncludeObject::None, now);
        let headers: Vec<&str> = table["columnDefinitions"]
            .as_array()
            .expect("columns")
            .iter()
            .filter_map(|c| c["name"].as_str())
            .collect();
        assert_eq!(
            headers,
            ["Name", "Deployment", "Desired", "Available", "Ready", "Age"]
        );
        assert_eq!(
            table["rows"][0]["cells"],
            json!(["x", "web", 3, null, "True", "60m"])
        );
    }

    #[test]
    fn no_columns_means_age() {
        let table = CustomPrinter::new(&[]).table(&[], IncludeObject::None, Timestamp::UNIX_EPOCH);
        assert_eq!(table["columnDefinitions"][1]["name"], "Age");
    }

    #[test]
    fn column_definitions_are_validated() {
        assert!(validate_column(&column("A", "integer", ".spec.a"), "c").is_empty());
        let errs = validate_column(&column("", "color", "spec.a"), "c");
        let text: Vec<String> = errs.iter().map(ToString::to_string).collect();
        assert_eq!(text.len(), 3, "{text:?}");
        assert!(text[0].starts_with("c.name: Required value"));
        assert!(text[1].starts_with("c.type: Unsupported value: \"color\""));
        assert!(text[2].ends_with("must be a simple json path starting with ."));
    }
}
