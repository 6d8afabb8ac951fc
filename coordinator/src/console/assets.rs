//! The stylesheet and the script, built into the binary (no Node at run time, no CDN).
//! Their URLs carry a digest of their content, so a browser may keep them for a year and
//! still gets the new ones after an upgrade.

use std::sync::OnceLock;

use bytes::Bytes;
use flink_autoscale_shared::http::Response;
use http_body_util::Full;
use hyper::header::{HeaderValue, CACHE_CONTROL, CONTENT_TYPE};
use hyper::StatusCode;

struct Asset {
    name: &'static str,
    content_type: &'static str,
    body: &'static str,
}

const ASSETS: [Asset; 2] = [
    Asset {
        name: "console.css",
        content_type: "text/css; charset=utf-8",
        body: include_str!("assets/console.css"),
    },
    Asset {
        name: "console.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("assets/console.js"),
    },
];

/// The URL of an asset, versioned by its content.
pub fn url(name: &str) -> String {
    static VERSIONS: OnceLock<Vec<String>> = OnceLock::new();
    let versions = VERSIONS.get_or_init(|| {
        ASSETS
            .iter()
            .map(|a| {
                let digest = ring::digest::digest(&ring::digest::SHA256, a.body.as_bytes());
                digest.as_ref()[..6]
                    .iter()
                    .map(|b| format!("{b:02x}"))
                    .collect()
            })
            .collect()
    });
    match ASSETS.iter().position(|a| a.name == name) {
        Some(i) => format!("/ui/assets/{name}?v={}", versions[i]),
        None => format!("/ui/assets/{name}"),
    }
}

/// The asset called `name`, or `None`.
pub fn serve(name: &str) -> Option<Response> {
    let asset = ASSETS.iter().find(|a| a.name == name)?;
    let mut resp = hyper::Response::new(Full::new(Bytes::from_static(asset.body.as_bytes())));
    *resp.status_mut() = StatusCode::OK;
    let headers = resp.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static(asset.content_type));
    headers.insert(
        CACHE_CONTROL,
        HeaderValue::from_static("public, max-age=31536000, immutable"),
    );
    Some(resp)
}
