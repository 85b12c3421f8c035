//! Response envelopes, list shapes and pagination (API.md §2.1, §2.4), and the XML fallback.

use crate::error::ApiError;
use crate::params::Params;
use serde_json::{Map, Value, json};

/// The page a list call asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Page {
    /// Index of the first item.
    pub start: usize,
    /// Items per page; `None` = unlimited.
    pub size: Option<usize>,
}

impl Page {
    /// Validates `page`/`pagesize` like `BaseListCmd` with `default.page.size = max`.
    ///
    /// `validateSpecificParameters` looks at the raw parameters: a `pagesize` other than -1
    /// without any `page` parameter, or a `page` parameter without `pagesize`, is a bare
    /// `ServerApiException` (431, `cserrorcode` 9999). A blank `page=` counts as present
    /// there, but `ParamProcessWorker.setFieldValue` leaves a blank integer unset, so with a
    /// `pagesize` it means the first page. `getPageSize` then refuses (as
    /// `InvalidParameterValueException`, 4350) a size above `max` and a `page` with -1.
    pub fn from_params(params: &Params, max: u64) -> Result<Self, ApiError> {
        let page = params.int("page")?;
        let size = params.int("pagesize")?;
        let page_sent = params.get("page").is_some();
        let default = usize::try_from(max).ok();
        match size {
            Some(s) if !page_sent && s != -1 => {
                return Err(ApiError::param_bare(
                    "\"page\" parameter is required when \"pagesize\" is specified",
                ));
            }
            None if page_sent => {
                return Err(ApiError::param_bare(
                    "\"pagesize\" parameter is required when \"page\" is specified",
                ));
            }
            _ => {}
        }
        match (page, size) {
            (_, None) => Ok(Self {
                start: 0,
                size: default,
            }),
            (_, Some(s)) if s > max as i64 => Err(ApiError::param(format!(
                "Page size can't exceed max allowed page size value: {max}"
            ))),
            (Some(_), Some(-1)) => Err(ApiError::param(
                "Can't specify page parameter when pagesize is -1 (Unlimited)",
            )),
            (None, Some(-1)) => Ok(Self {
                start: 0,
                size: None,
            }),
            (p, Some(s)) => {
                let s = usize::try_from(s.max(1)).unwrap_or(1);
                let p = usize::try_from(p.unwrap_or(1).max(1)).unwrap_or(1);
                Ok(Self {
                    start: s.saturating_mul(p - 1),
                    size: Some(s),
                })
            }
        }
    }

    /// Everything on one page (commands that ignore paging).
    pub fn all() -> Self {
        Self {
            start: 0,
            size: None,
        }
    }
}

/// A list body: `count` only when non-zero, the item key only when the page has items.
pub fn list_body(item_key: &str, items: Vec<Value>, page: Page) -> Value {
    let total = items.len();
    let mut body = Map::new();
    if total > 0 {
        body.insert("count".into(), json!(total));
    }
    let shown: Vec<Value> = items
        .into_iter()
        .skip(page.start)
        .take(page.size.unwrap_or(usize::MAX))
        .collect();
    if !shown.is_empty() {
        body.insert(item_key.into(), Value::Array(shown));
    }
    Value::Object(body)
}

/// `{"<command lower-cased>response": body}`.
pub fn envelope(command: &str, body: Value) -> Value {
    json!({ response_name(command): body })
}

/// The response name of a command.
pub fn response_name(command: &str) -> String {
    format!("{}response", command.to_lowercase())
}

/// A minimal XML rendering (the server's default when `response=json` is not sent) of an
/// envelope `{"<name>": body}`: the root element is the response name (`<cmd>response` or
/// `errorresponse`), as `ApiResponseSerializer.toXMLSerializedString` writes it, and carries
/// `cloud-stack-version="<version>"` when `version` is given (an authenticated caller while
/// `expose.cloudstack.version.api.xml.response` is on).
pub fn to_xml(value: &Value, version: Option<&str>) -> String {
    fn write(out: &mut String, key: &str, value: &Value) {
        match value {
            Value::Object(map) => {
                out.push_str(&format!("<{key}>"));
                for (k, v) in map {
                    write(out, k, v);
                }
                out.push_str(&format!("</{key}>"));
            }
            Value::Array(items) => items.iter().for_each(|v| write(out, key, v)),
            Value::String(s) => {
                let escaped = s
                    .replace('&', "&amp;")
                    .replace('<', "&lt;")
                    .replace('>', "&gt;");
                out.push_str(&format!("<{key}>{escaped}</{key}>"));
            }
            Value::Null => {}
            other => out.push_str(&format!("<{key}>{other}</{key}>")),
        }
    }
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>");
    if let Value::Object(map) = value {
        for (k, v) in map {
            match (version, v) {
                (Some(version), Value::Object(fields)) => {
                    let version = version.replace('&', "&amp;").replace('"', "&quot;");
                    out.push_str(&format!("<{k} cloud-stack-version=\"{version}\">"));
                    for (field, value) in fields {
                        write(&mut out, field, value);
                    }
                    out.push_str(&format!("</{k}>"));
                }
                _ => write(&mut out, k, v),
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(pairs: &[(&str, &str)]) -> Result<Page, ApiError> {
        Page::from_params(&Params::from_pairs(pairs), 500)
    }

    #[test]
    fn list_shapes() {
        assert_eq!(list_body("zone", vec![], Page::all()), json!({}));
        let items = vec![json!(1), json!(2), json!(3)];
        assert_eq!(
            list_body(
                "zone",
                items.clone(),
                Page {
                    start: 2,
                    size: Some(2)
                }
            ),
            json!({"count": 3, "zone": [3]})
        );
        assert_eq!(
            list_body(
                "zone",
                items,
                Page {
                    start: 4,
                    size: Some(2)
                }
            ),
            json!({"count": 3})
        );
    }

    #[test]
    fn paging_rules() {
        assert_eq!(
            page(&[]).unwrap(),
            Page {
                start: 0,
                size: Some(500)
            }
        );
        assert_eq!(
            page(&[("page", "3"), ("pagesize", "10")]).unwrap(),
            Page {
                start: 20,
                size: Some(10)
            }
        );
        assert_eq!(page(&[("pagesize", "-1")]).unwrap(), Page::all());
        assert!(
            page(&[("page", "1"), ("pagesize", "501")])
                .unwrap_err()
                .text
                .contains("max allowed page size value: 500")
        );
        assert_eq!(page(&[("pagesize", "10")]).unwrap_err().code, 431);
        assert_eq!(page(&[("page", "1")]).unwrap_err().code, 431);
    }

    #[test]
    fn xml_fallback() {
        let body = json!({"listzonesresponse": {"count": 1, "zone": [{"name": "a<b"}]}});
        let xml = to_xml(&body, None);
        assert!(xml.ends_with("<listzonesresponse><count>1</count><zone><name>a&lt;b</name></zone></listzonesresponse>"));
        let xml = to_xml(&body, Some("4.22.0.0"));
        assert!(xml.ends_with("<listzonesresponse cloud-stack-version=\"4.22.0.0\"><count>1</count><zone><name>a&lt;b</name></zone></listzonesresponse>"), "{xml}");
    }
}
