//! `GET /jobs/:jid/vertices/:vid/subtasks/metrics` from the agent's cache, with Flink's
//! semantics: no `get` lists the names; `get` returns the requested names in request order
//! with the requested aggregates, and `[]` if any requested name is unknown; an unknown job
//! or vertex is `200 []`; an invalid `agg` is a 400.

use std::collections::HashMap;

use hyper::StatusCode;
use percent_encoding::percent_decode_str;
use serde_json::{Map, Value};

use super::flink_error;
use crate::daemon::StatusBoard;
use flink_autoscale_core::samples::FlinkF64;
use flink_autoscale_shared::http::{self as shttp, Response};

const AGGS: [&str; 4] = ["min", "max", "avg", "sum"];

/// `(job_id, vertex_id)` if `path` is `/jobs/<jid>/vertices/<vid>/subtasks/metrics`.
pub fn parse_metrics_path(path: &str) -> Option<(&str, &str)> {
    let rest = path.strip_prefix("/jobs/")?;
    let (job, rest) = rest.split_once("/vertices/")?;
    let vertex = rest.strip_suffix("/subtasks/metrics")?;
    let plain = |s: &str| !s.is_empty() && !s.contains('/');
    (plain(job) && plain(vertex)).then_some((job, vertex))
}

/// Query parameters as Flink reads them: repeated keys joined with `,`, values decoded.
fn query_params(query: &str) -> HashMap<String, String> {
    let mut params: HashMap<String, String> = HashMap::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        let decode = |s: &str| {
            percent_decode_str(&s.replace('+', " "))
                .decode_utf8_lossy()
                .into_owned()
        };
        let entry = params.entry(decode(k)).or_default();
        if !entry.is_empty() {
            entry.push(',');
        }
        entry.push_str(&decode(v));
    }
    params
}

pub fn subtask_metrics(
    state: &StatusBoard,
    job_id: &str,
    vertex_id: &str,
    query: &str,
) -> Response {
    let params = query_params(query);
    let aggs: Vec<String> = match params.get("agg").filter(|a| !a.is_empty()) {
        None => AGGS.iter().map(|s| s.to_string()).collect(),
        Some(list) => {
            let mut out = Vec::new();
            for a in list.split(',') {
                let lower = a.to_ascii_lowercase();
                if !AGGS.contains(&lower.as_str()) && lower != "skew" {
                    return flink_error(
                        StatusCode::BAD_REQUEST,
                        &format!("Bad request, could not parse parameters: Cannot resolve query parameter (agg) from value \"{a}\"."),
                    );
                }
                out.push(lower);
            }
            out
        }
    };
    let empty = || shttp::json(StatusCode::OK, &Vec::<Value>::new());
    let Some(job) = state.job(job_id) else {
        return empty();
    };
    let Some(values) = job.values.get(vertex_id) else {
        return empty();
    };
    let Some(get) = params.get("get").filter(|g| !g.is_empty()) else {
        let names: Vec<Value> = values
            .iter()
            .map(|m| serde_json::json!({ "id": m.id }))
            .collect();
        return shttp::json(StatusCode::OK, &names);
    };
    let mut out = Vec::new();
    for name in get.split(',') {
        // All-or-nothing, as Flink: one unknown name empties the whole answer.
        let Some(m) = values.iter().find(|m| m.id == name) else {
            return empty();
        };
        let mut obj = Map::new();
        obj.insert("id".into(), Value::String(m.id.clone()));
        for agg in &aggs {
            let v: Option<FlinkF64> = match agg.as_str() {
                "min" => m.min,
                "max" => m.max,
                "avg" => m.avg,
                "sum" => m.sum,
                _ => None,
            };
            if let Some(v) = v {
                obj.insert(agg.clone(), serde_json::to_value(v).unwrap_or(Value::Null));
            }
        }
        out.push(Value::Object(obj));
    }
    shttp::json(StatusCode::OK, &out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_paths_and_queries() {
        assert_eq!(
            parse_metrics_path("/jobs/a/vertices/b/subtasks/metrics"),
            Some(("a", "b"))
        );
        assert_eq!(
            parse_metrics_path("/jobs/a/vertices/b/subtasks/0/metrics"),
            None
        );
        assert_eq!(
            parse_metrics_path("/jobs//vertices/b/subtasks/metrics"),
            None
        );
        let p = query_params("get=a,b&get=c%5B1%5D&agg=max");
        assert_eq!(p["get"], "a,b,c[1]");
        assert_eq!(p["agg"], "max");
    }
}
