//! Form fields and query parameters: `application/x-www-form-urlencoded` pairs, each read at
//! most once, with a 400 that names the field for a missing, repeated or unknown one.

use flink_autoscale_shared::http::{self, Request};
use hyper::header::CONTENT_TYPE;
use hyper::StatusCode;

use super::Failure;
use crate::api::App;

/// The fields of one form or query, consumed as the handler reads them.
#[derive(Debug, Default)]
pub struct Fields {
    pairs: Vec<(String, String)>,
}

impl Fields {
    fn parse(bytes: &[u8]) -> Fields {
        Fields {
            pairs: url::form_urlencoded::parse(bytes).into_owned().collect(),
        }
    }

    /// The parameters of the request's query string.
    pub fn of_query(req: &Request) -> Fields {
        Fields::parse(req.uri().query().unwrap_or("").as_bytes())
    }

    /// The fields of a posted form (capped and timed like every body).
    pub async fn of_body(app: &App, req: Request) -> Result<Fields, Failure> {
        let content_type = req
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        let media_type = content_type.split(';').next().unwrap_or("").trim();
        if !media_type.eq_ignore_ascii_case("application/x-www-form-urlencoded") {
            return Err(Failure::page(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "Content-Type",
                "forms must be sent as application/x-www-form-urlencoded",
            ));
        }
        let bytes = http::read_body(req.into_body(), app.max_body_bytes, app.body_read_timeout)
            .await
            .map_err(|e| Failure::page(StatusCode::BAD_REQUEST, "body", e.to_string()))?;
        Ok(Fields::parse(&bytes))
    }

    /// The value of `name` (blank counts as absent); a repeated field is an error.
    pub fn take(&mut self, name: &str) -> Result<Option<String>, Failure> {
        let mut found = None;
        let mut i = 0;
        while i < self.pairs.len() {
            if self.pairs[i].0 == name {
                let (_, value) = self.pairs.remove(i);
                if found.is_some() {
                    return Err(Failure::invalid(name, "is given more than once"));
                }
                found = Some(value);
            } else {
                i += 1;
            }
        }
        Ok(found.filter(|v| !v.trim().is_empty()))
    }

    /// The value of `name`, which must be present and not blank.
    pub fn require(&mut self, name: &str) -> Result<String, Failure> {
        self.take(name)?
            .ok_or_else(|| Failure::invalid(name, "is required"))
    }

    /// Fails on a field no one read, naming it and the known ones.
    pub fn finish(self, known: &str) -> Result<(), Failure> {
        match self.pairs.first() {
            Some((name, _)) => Err(Failure::invalid(
                name,
                &format!("is not a field here (known: {known})"),
            )),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_read_once_and_unknown_ones_are_named() {
        let mut f = Fields::parse(b"region=eu+west&reason=&csrf=x&extra=1");
        assert_eq!(f.take("region").unwrap().as_deref(), Some("eu west"));
        assert_eq!(f.take("reason").unwrap(), None);
        assert!(f.require("missing").is_err());
        assert_eq!(f.require("csrf").unwrap(), "x");
        let err = f.finish("region, reason, csrf").unwrap_err();
        assert_eq!(err.field(), Some("extra"));
        let mut twice = Fields::parse(b"a=1&a=2");
        assert_eq!(twice.take("a").unwrap_err().field(), Some("a"));
    }
}
