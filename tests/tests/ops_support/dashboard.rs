//! The Grafana dashboard (`packaging/grafana/flink-autoscale.json`): its panels and every
//! PromQL expression it runs.

use serde_json::Value;

use super::read_repo_file;

pub const DASHBOARD: &str = "packaging/grafana/flink-autoscale.json";

pub fn dashboard() -> Value {
    serde_json::from_str(&read_repo_file(DASHBOARD)).unwrap_or_else(|e| panic!("{DASHBOARD}: {e}"))
}

/// Every panel, rows' nested panels included.
pub fn panels(dash: &Value) -> Vec<&Value> {
    let mut out = Vec::new();
    for panel in dash["panels"].as_array().expect("panels") {
        out.push(panel);
        if let Some(nested) = panel["panels"].as_array() {
            out.extend(nested);
        }
    }
    out
}

/// Every PromQL expression: panel targets, annotations and template variable queries.
pub fn expressions(dash: &Value) -> Vec<String> {
    let mut out: Vec<String> = panels(dash)
        .iter()
        .flat_map(|p| p["targets"].as_array().into_iter().flatten())
        .filter_map(|t| t["expr"].as_str().map(str::to_string))
        .collect();
    for annotation in dash["annotations"]["list"].as_array().into_iter().flatten() {
        if let Some(expr) = annotation["expr"].as_str() {
            out.push(expr.to_string());
        }
    }
    for var in dash["templating"]["list"].as_array().into_iter().flatten() {
        if let Some(query) = var["query"]["query"].as_str().or(var["query"].as_str()) {
            if var["type"] == "query" {
                out.push(query.to_string());
            }
        }
    }
    out
}
