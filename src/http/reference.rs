//! The interactive API reference at `/docs`: Swagger UI, as poem-openapi embeds it in the
//! binary (its script and stylesheet are taken once from the page the crate renders), loading
//! the document this server builds at run time from `openapi.json`, and sending "Try it out"
//! requests with the bearer token the console pages signed in with. Nothing is fetched from
//! outside the server: the page's Content-Security-Policy allows this origin only.

use std::sync::OnceLock;

/// The page: the console's top bar and the reference.
pub const PAGE: &str = include_str!("reference/docs.html");

/// Scripts from this server only; Swagger UI sets inline styles, and shows images as data URLs.
pub const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; \
                       img-src 'self' data:; font-src 'self' data:; connect-src 'self'; \
                       object-src 'none'; base-uri 'none'; frame-ancestors 'none'";

/// Swagger UI's script and stylesheet, cut out of the page poem-openapi renders around them.
struct Bundle {
    script: String,
    style: String,
}

fn bundle() -> &'static Bundle {
    static BUNDLE: OnceLock<Bundle> = OnceLock::new();
    BUNDLE.get_or_init(|| {
        let html = super::api::service().swagger_ui_html();
        Bundle {
            script: between(&html, "<script charset=\"UTF-8\">", "</script>").to_string(),
            style: between(&html, "<style charset=\"UTF-8\">", "</style>").to_string(),
        }
    })
}

/// The text after the first `start` up to the next `end`; empty when either is missing.
fn between<'a>(text: &'a str, start: &str, end: &str) -> &'a str {
    text.split_once(start)
        .and_then(|(_, rest)| rest.split_once(end))
        .map_or("", |(inner, _)| inner)
}

/// The asset `name` under `/docs/assets/`: its content type and text.
pub fn asset(name: &str) -> Option<(&'static str, &'static str)> {
    match name {
        "swagger-ui.js" => Some(("text/javascript; charset=utf-8", &bundle().script)),
        "swagger-ui.css" => Some(("text/css; charset=utf-8", &bundle().style)),
        "docs.js" => Some((
            "text/javascript; charset=utf-8",
            include_str!("reference/docs.js"),
        )),
        "docs.css" => Some((
            "text/css; charset=utf-8",
            include_str!("reference/docs.css"),
        )),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_embedded_swagger_ui_is_found_in_the_crates_page() {
        let (_, js) = asset("swagger-ui.js").unwrap();
        assert!(js.len() > 100_000 && js.contains("SwaggerUIBundle"));
        assert!(!js.contains("</script>"));
        let (_, css) = asset("swagger-ui.css").unwrap();
        assert!(css.len() > 10_000 && css.contains(".swagger-ui"));
        assert!(asset("nope.js").is_none());
        assert_eq!(between("a<x>b</x>c", "<x>", "</x>"), "b");
        assert_eq!(between("a<x>b", "<x>", "</x>"), "");
    }

    #[test]
    fn the_page_loads_only_this_servers_assets() {
        for src in [
            "docs/assets/swagger-ui.js",
            "docs/assets/docs.js",
            "docs/assets/swagger-ui.css",
        ] {
            assert!(PAGE.contains(src), "{src}");
        }
        assert!(!PAGE.contains("http://") && !PAGE.contains("https://"));
    }
}
