//! Query parameters: list/watch options, delete options and `dryRun`, parsed strictly (a malformed value is a 400).

use kcm_machinery::labels::Selector;

use crate::error::{ApiError, Result};
use crate::openapi::field_validation::FieldValidation;
use crate::registry::delete::DeleteOptions;
use crate::registry::field_selector::FieldSelector;
use crate::registry::list::ListOptions;
use crate::registry::options::WriteOptions;
use crate::registry::resource::ResourceDef;
use crate::strict_decoding::Findings;

/// Query parameters as `(name, value)` pairs, percent-decoded.
#[derive(Clone, Debug, Default)]
pub struct Query {
    pairs: Vec<(String, String)>,
}

impl Query {
    /// Parses a raw query string.
    pub fn parse(raw: Option<&str>) -> Result<Self> {
        let Some(raw) = raw.filter(|r| !r.is_empty()) else {
            return Ok(Self::default());
        };
        let pairs: Vec<(String, String)> = serde_urlencoded_pairs(raw)?;
        Ok(Self { pairs })
    }

    /// The last value of `name`.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.pairs
            .iter()
            .rev()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// Every value of `name`.
    pub fn all<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.pairs
            .iter()
            .filter(move |(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// A boolean parameter (`true`/`1`, `false`/`0`); absent is `None`.
    pub fn bool(&self, name: &str) -> Result<Option<bool>> {
        match self.get(name) {
            None => Ok(None),
            Some("true" | "1" | "True" | "TRUE") => Ok(Some(true)),
            Some("false" | "0" | "False" | "FALSE" | "") => Ok(Some(false)),
            Some(other) => Err(ApiError::bad_request(format!(
                "invalid value {other:?} for query parameter {name}: expected a boolean"
            ))),
        }
    }

    /// An integer parameter; absent is `None`.
    pub fn int(&self, name: &str) -> Result<Option<i64>> {
        match self.get(name) {
            None | Some("") => Ok(None),
            Some(v) => v.parse::<i64>().map(Some).map_err(|_| {
                ApiError::bad_request(format!(
                    "invalid value {v:?} for query parameter {name}: expected an integer"
                ))
            }),
        }
    }

    /// `dryRun=All` (any other value is a 400, as upstream's `ValidateDryRun`).
    pub fn dry_run(&self) -> Result<bool> {
        let mut dry = false;
        for v in self.all("dryRun") {
            match v {
                "All" => dry = true,
                "" => {}
                other => {
                    return Err(ApiError::bad_request(format!(
                        "dryRun: Unsupported value: {other:?}: supported values: \"All\""
                    )));
                }
            }
        }
        Ok(dry)
    }

    /// The options of a create, update or patch: `dryRun`, `fieldValidation`,
    /// `fieldManager` (at most 128 characters, as upstream) and `force`.
    pub fn write_options(&self) -> Result<WriteOptions> {
        let field_manager = self.get("fieldManager").filter(|m| !m.is_empty());
        if let Some(m) = field_manager
            && m.chars().count() > 128
        {
            return Err(ApiError::bad_request(format!(
                "fieldManager: Too long: may not be longer than 128 (got {})",
                m.chars().count()
            )));
        }
        Ok(WriteOptions {
            dry_run: self.dry_run()?,
            field_validation: FieldValidation::parse(self.get("fieldValidation"))?,
            field_manager: field_manager.map(str::to_owned),
            force: self.bool("force")?.unwrap_or(false),
            subresource: "",
            user: None,
            decoding: Findings::default(),
        })
    }

    /// The list and watch options, with selectors parsed against `def`.
    pub fn list_options(&self, def: &ResourceDef, watch_prefix: bool) -> Result<ListOptions> {
        let label_selector = match self.get("labelSelector").filter(|s| !s.is_empty()) {
            None => None,
            // The parser's errors read as upstream's.
            Some(s) => Some(Selector::parse(s).map_err(|e| ApiError::bad_request(e.to_string()))?),
        };
        let field_selector = FieldSelector::parse(self.get("fieldSelector").unwrap_or(""), def)?;
        let limit = self.int("limit")?.unwrap_or(0);
        Ok(ListOptions {
            label_selector,
            field_selector,
            resource_version: self.get("resourceVersion").unwrap_or("").to_owned(),
            resource_version_match: self.get("resourceVersionMatch").unwrap_or("").to_owned(),
            limit: limit.max(0),
            continue_token: self.get("continue").unwrap_or("").to_owned(),
            watch: watch_prefix || self.bool("watch")?.unwrap_or(false),
            allow_watch_bookmarks: self.bool("allowWatchBookmarks")?.unwrap_or(false),
            send_initial_events: self.bool("sendInitialEvents")?,
            timeout_seconds: self.int("timeoutSeconds")?,
        })
    }

    /// Delete options given in the query (the body's, if any, are merged on top).
    pub fn delete_options(&self) -> Result<DeleteOptions> {
        Ok(DeleteOptions {
            grace_period_seconds: self.int("gracePeriodSeconds")?,
            precondition_uid: None,
            precondition_resource_version: None,
            propagation_policy: self
                .get("propagationPolicy")
                .filter(|p| !p.is_empty())
                .map(str::to_owned),
            orphan_dependents: self.bool("orphanDependents")?,
            dry_run: self.dry_run()?,
        })
    }
}

/// Splits and percent-decodes `a=b&c=d` (`+` is a space).
fn serde_urlencoded_pairs(raw: &str) -> Result<Vec<(String, String)>> {
    raw.split('&')
        .filter(|p| !p.is_empty())
        .map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            Ok((percent_decode(k)?, percent_decode(v)?))
        })
        .collect()
}

fn percent_decode(s: &str) -> Result<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b'%' => {
                let hex = bytes
                    .get(i + 1..i + 3)
                    .and_then(|h| std::str::from_utf8(h).ok())
                    .and_then(|h| u8::from_str_radix(h, 16).ok())
                    .ok_or_else(|| ApiError::bad_request("malformed percent-encoding in query"))?;
                out.push(hex);
                i += 3;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).map_err(|_| ApiError::bad_request("query is not valid UTF-8"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::pod;

    #[test]
    fn parses_list_options() {
        let q = Query::parse(Some(
            "labelSelector=app%3Dweb%2Ctier+in+%28a%2Cb%29&fieldSelector=spec.nodeName%3Dn1&limit=5&watch=1&allowWatchBookmarks=true&timeoutSeconds=30",
        ))
        .expect("parses");
        let opts = q.list_options(&pod::PODS, false).expect("options");
        assert_eq!(opts.limit, 5);
        assert!(opts.watch);
        assert!(opts.allow_watch_bookmarks);
        assert_eq!(opts.timeout_seconds, Some(30));
        assert_eq!(opts.label_selector.map(|s| s.requirements().len()), Some(2));
        assert_eq!(
            opts.field_selector.required_value("spec.nodeName"),
            Some("n1")
        );
    }

    #[test]
    fn rejects_malformed_values() {
        let cases = [
            ("bad int", "limit=abc"),
            ("bad bool", "watch=maybe"),
            ("bad escape", "limit=%zz"),
            ("bad dry run", "dryRun=Some"),
            ("bad label selector", "labelSelector=a%20in"),
            ("unknown field", "fieldSelector=spec.bogus%3Dx"),
        ];
        for (name, raw) in cases {
            let q = Query::parse(Some(raw));
            let err = q
                .and_then(|q| {
                    q.dry_run()?;
                    q.list_options(&pod::PODS, false).map(|_| ())
                })
                .expect_err(name);
            assert_eq!(err.code, 400, "case {name}");
        }
    }
}
