//! How to add a plugin of your own: add it to the plugin registry the app is built with, name
//! it in an entity file, and run the server as usual.
//!
//! ```sh
//! cargo run --example custom_plugin
//! curl -u admin:example -H 'content-type: application/json' \
//!      -d '{"title": "Hello, World!"}' http://127.0.0.1:8080/articles
//! # -> {"id":1,"title":"Hello, World!","slug":"hello-world",...}
//! ```
//!
//! `cargo run --example custom_plugin -- entity-schema` prints the JSON Schema of entity files
//! for this build, the `slug` plugin's settings included, for editors to check
//! `entities/articles.yaml` with.

mod slug;

use std::sync::Arc;

/// The plugins of this build: the built-in ones and `slug`.
fn plugins() -> entiserve::plugins::Registry {
    entiserve::plugins::Registry::builtin().with(Arc::new(slug::Slug))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    if std::env::args().nth(1).as_deref() == Some("entity-schema") {
        println!("{:#}", plugins().entity_schema());
        return Ok(());
    }
    let here = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/custom_plugin");
    let data = std::env::temp_dir().join("entiserve-custom-plugin");
    let mut settings = entiserve::settings::Settings::new(&data, here.join("entities"));
    settings.admin_password = Some("example".into());
    if let Ok(bind) = std::env::var("ENTISERVE_BIND") {
        settings.bind = bind.parse()?;
    }
    let app = entiserve::App::build_with(settings, plugins()).await?;
    eprintln!(
        "entiserve with the `slug` plugin on http://{} (admin / example, data in {})",
        app.addr(),
        data.display()
    );
    app.run_until(async {
        let _ = tokio::signal::ctrl_c().await;
    })
    .await
}
