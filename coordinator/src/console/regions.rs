//! The Regions page: regions being evacuated (scale-downs there are refused), with forms to
//! flag and lift them, and the pauses in force (see [`super::pauses`]).

use flink_autoscale_core::protocol::{validate_identifier, EvacuationRequest};
use flink_autoscale_shared::http::{Request, Response};
use hyper::StatusCode;

use super::form::Fields;
use super::html::{self, csrf_field, escape, path_segment, Section};
use super::session::Session;
use super::{time, Failure};
use crate::api::App;
use crate::store::now_ms;

/// `GET /ui/regions`.
pub async fn page(app: &App, req: &Request, session: &Session) -> Result<Response, Failure> {
    Fields::of_query(req).finish("none")?;
    let store = app.store.get()?;
    let regions = store.regions().await?.regions;
    let pauses = store.pauses().await?.pauses;
    let now = now_ms();
    let mut main = String::from(
        "<h1>Regions and pauses</h1><h2>Evacuating regions</h2>\
         <p class=\"hint\">While a region is flagged, every proposal there that lowers a \
         parallelism is refused (<code>region_evacuating</code>); scale-ups pass.</p>",
    );
    main.push_str("<div id=\"regions\" data-refresh=\"15\">");
    if regions.is_empty() {
        main.push_str(&html::empty("No region is being evacuated."));
    } else {
        main.push_str(
            "<table><thead><tr><th>Region</th><th>Reason</th><th>Since</th><th></th></tr></thead><tbody>",
        );
        for r in &regions {
            let lift = if session.can_act() {
                let action = format!("/ui/regions/{}/clear", path_segment(&r.region));
                html::button_form(session, &action, "Lift")
            } else {
                String::new()
            };
            main.push_str(&format!(
                "<tr data-region=\"{region}\"><td><b>{region}</b></td><td>{reason}</td>\
                 <td title=\"{at}\">{ago}</td><td>{lift}</td></tr>",
                region = escape(&r.region),
                reason = escape(&r.reason),
                at = time::utc(r.since),
                ago = time::ago(now, r.since),
            ));
        }
        main.push_str("</tbody></table>");
    }
    main.push_str("</div>");
    if session.can_act() {
        main.push_str(&format!(
            "<form class=\"action\" id=\"flag-region\" method=\"post\" action=\"/ui/regions\">{}\
             <h3>Flag a region</h3>\
             <label>Region <input name=\"region\" required placeholder=\"eu-west-1\"></label>\
             <label>Reason <input name=\"reason\" required placeholder=\"failover to eu-central-1, INC-4711\"></label>\
             <button type=\"submit\">Flag as evacuating</button></form>",
            csrf_field(session)
        ));
    }
    main.push_str(&super::pauses::section(session, &pauses, now));
    Ok(html::response(
        StatusCode::OK,
        html::page("Regions and pauses", Section::Regions, Some(session), &main),
    ))
}

/// `POST /ui/regions`: flag a region.
pub async fn flag(app: &App, req: Request, session: &Session) -> Result<Response, Failure> {
    let mut form = session.read_form(app, req).await?;
    let region = form.require("region")?.trim().to_string();
    let reason = form.require("reason")?;
    form.finish("region, reason")?;
    validate_identifier("region", &region).map_err(|e| Failure::invalid("region", &e.message))?;
    let body = EvacuationRequest { reason };
    body.validate()
        .map_err(|e| Failure::invalid(&e.field, &e.message))?;
    app.store
        .get()?
        .set_evacuation(&region, body.reason.trim(), &session.principal().name)
        .await?;
    tracing::warn!(%region, reason = %body.reason, admin = %session.principal().name, via = "console", "region flagged as evacuating");
    Ok(html::redirect("/ui/regions"))
}

/// `POST /ui/regions/{region}/clear`: lift a region's flag.
pub async fn unflag(
    app: &App,
    req: Request,
    session: &Session,
    raw_region: &str,
) -> Result<Response, Failure> {
    session.read_form(app, req).await?.finish("csrf")?;
    let region = percent_encoding::percent_decode_str(raw_region)
        .decode_utf8()
        .map_err(|_| Failure::invalid("region", "must be UTF-8"))?
        .into_owned();
    validate_identifier("region", &region).map_err(|e| Failure::invalid("region", &e.message))?;
    if !app
        .store
        .get()?
        .clear_evacuation(&region, &session.principal().name)
        .await?
    {
        return Err(Failure::page(
            StatusCode::NOT_FOUND,
            "region",
            format!("region {region} is not evacuating"),
        ));
    }
    tracing::warn!(%region, admin = %session.principal().name, via = "console", "region evacuation cleared");
    Ok(html::redirect("/ui/regions"))
}
