//! The entities as the data page builds its forms from them (`GET /tools/entities`): each
//! entity's fields with their type, whether they are required, their limits, enum values and
//! referenced entity, the entity's access rules (decided here when they are lists of roles), and
//! the field that names an object in a reference picker. Taken from the catalog in force, so the
//! forms follow a reload.

use crate::schema::rules::Rule;
use crate::schema::{Action, Catalog, Entity, Field, FieldType};
use serde_json::{Map, Value as Json, json};

/// Every entity of `catalog`, by name.
pub fn describe(catalog: &Catalog) -> Json {
    let mut out = Map::new();
    for e in catalog.entities.values() {
        out.insert(e.name.clone(), entity(e));
    }
    Json::Object(out)
}

fn entity(e: &Entity) -> Json {
    json!({
        "name": e.name,
        "key": e.key,
        "label": label_field(e),
        "access": access(e),
        "fields": e.fields.iter().map(field).collect::<Vec<_>>(),
    })
}

/// Each rule as written, with its roles when it is a list of roles (`public: true` when it
/// needs no credentials): what a page can decide without rows. An expression is decided by
/// the server, row by row.
fn access(e: &Entity) -> Json {
    let mut out = Map::new();
    for a in Action::ALL {
        let mut o = Map::new();
        o.insert("rule".into(), json!(e.access.written(a)));
        match e.access.rule(a) {
            Rule::Public => {
                o.insert("public".into(), json!(true));
            }
            Rule::Roles(roles) => {
                o.insert("roles".into(), json!(roles));
            }
            Rule::Expr(_) => {}
        }
        out.insert(a.key().into(), Json::Object(o));
    }
    Json::Object(out)
}

fn field(f: &Field) -> Json {
    let mut o = Map::new();
    o.insert("name".into(), json!(f.name));
    o.insert("type".into(), json!(f.ty.name()));
    o.insert("required".into(), json!(f.required));
    let mut put = |k: &str, v: Json| {
        o.insert(k.into(), v);
    };
    match &f.ty {
        FieldType::Enum(values) => put("values", json!(values)),
        FieldType::Reference(to) => put("entity", json!(to)),
        _ => {}
    }
    if let Some(n) = f.max_length {
        put("max_length", json!(n));
    }
    if let Some(d) = &f.default {
        put("default", d.clone());
    }
    if f.secret {
        put("secret", json!(true));
    }
    if let Some(r) = &f.write_role {
        put("write", json!(r.as_str()));
    }
    if let Some(d) = &f.description {
        put("description", json!(d));
    }
    Json::Object(o)
}

/// The field a person knows an object by: a one-field key of text, else the first required
/// string field, else the first string field (not a secret one); `null` when there is none.
fn label_field(e: &Entity) -> Option<&str> {
    let text = |f: &&Field| matches!(f.ty, FieldType::String | FieldType::Text) && !f.secret;
    if let [one] = e.key.as_slice()
        && e.field(one).as_ref().is_some_and(text)
    {
        return Some(one);
    }
    e.fields
        .iter()
        .filter(text)
        .find(|f| f.required)
        .or_else(|| e.fields.iter().find(text))
        .map(|f| f.name.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn catalog(yaml: &str) -> Catalog {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("things.yaml"), yaml).unwrap();
        crate::schema::compile_dir(dir.path(), &[]).unwrap_or_else(|e| panic!("{}", e[0]))
    }

    #[test]
    fn fields_carry_what_a_form_needs() {
        let c = catalog(
            "name: things\naccess: { read: user, write: admin }\nfields:\n  \
             code: { type: string, max_length: 8, required: true }\n  \
             kind: { type: enum, values: [a, b], default: a }\n  \
             price: { type: decimal }\n  \
             parent: { type: reference, entity: things }\n",
        );
        let d = describe(&c);
        let t = &d["things"];
        assert_eq!(t["label"], "code");
        assert_eq!(t["access"]["update"]["roles"], json!(["admin"]));
        assert_eq!(t["access"]["list"]["rule"], "[user]");
        assert_eq!(
            t["fields"][0],
            json!({"name": "code", "type": "string", "required": true, "max_length": 8})
        );
        assert_eq!(t["fields"][1]["values"], json!(["a", "b"]));
        assert_eq!(t["fields"][1]["default"], "a");
        assert_eq!(t["fields"][2]["type"], "decimal");
        assert_eq!(t["fields"][3]["entity"], "things");
    }

    #[test]
    fn without_text_fields_there_is_no_label() {
        let c = catalog(
            "name: things\naccess: { read: user, write: user }\nfields:\n  n: { type: integer }\n",
        );
        assert_eq!(describe(&c)["things"]["label"], Json::Null);
    }
}
