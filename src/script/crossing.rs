//! Records crossing into a hook and back, one after another in the same context (the calls of
//! a chunk): [`Crossing`] makes the atom of each field name once, and keeps what each property
//! of the record last given was set to, so that what the hook left alone comes back as it
//! was, without converting it again.
//!
//! A record comes back as [`values::from_js`] reads it, the numbers the hook left keeping
//! their digits as [`values::keep_unchanged`] has them: when the object chosen has the fields
//! given, by the same atoms in the same order, each property whose value is the very value
//! given (a string, a number, a boolean or null: what a hook cannot change in place) keeps
//! the record's own, and only the others are read back into the record as it stands. Any
//! other object is read back whole.

use super::values::{self, BackError};
use rquickjs::atom::PredefinedAtom;
use rquickjs::object::Property;
use rquickjs::{Atom, Ctx, Object, Type, Value};
use serde_json::{Map, Value as Json};

/// What crosses a context's records, kept from one record to the next.
pub struct Crossing<'js> {
    ctx: Ctx<'js>,
    /// The field names met so far, with their atoms.
    names: Vec<(String, Atom<'js>)>,
    /// For each field of the record last given, in order: its name's place in `names`, and
    /// the value its property was set to.
    given: Vec<(usize, Value<'js>)>,
    /// The properties of the object chosen, as read back.
    read: Vec<(Atom<'js>, Value<'js>)>,
    /// Objects that keep the shapes of the second record's object alive, the i-th with its
    /// first i + 1 fields: QuickJS then finds each shape the next records' objects pass
    /// through instead of making it again. (Not for a single record, which they would only
    /// slow down.)
    holders: Vec<Object<'js>>,
    /// How many records were given.
    records: usize,
}

/// The most fields of a record whose shapes [`Crossing`] keeps.
const HELD: usize = 32;

impl<'js> Crossing<'js> {
    /// Nothing met yet, in `ctx`.
    pub fn new(ctx: &Ctx<'js>) -> Crossing<'js> {
        Crossing {
            ctx: ctx.clone(),
            names: Vec::new(),
            given: Vec::new(),
            read: Vec::new(),
            holders: Vec::new(),
            records: 0,
        }
    }

    /// `record` as a JavaScript object, as [`values::object_to_js`] makes it; what it was
    /// given is kept for [`Crossing::back`].
    pub fn give(&mut self, record: &Map<String, Json>) -> rquickjs::Result<Object<'js>> {
        let object = Object::new(self.ctx.clone())?;
        for (i, (key, value)) in record.iter().enumerate() {
            // The same field at the same place as in the record before, most often.
            let guess = self.given.get(i).map(|(n, _)| *n);
            let n = self.name(key, guess)?;
            let value = values::to_js(&self.ctx, value)?;
            let field = Property::from(value.clone())
                .writable()
                .enumerable()
                .configurable();
            object.prop(self.names[n].1.clone(), field)?;
            match self.given.get_mut(i) {
                Some(slot) => *slot = (n, value),
                None => self.given.push((n, value)),
            }
        }
        self.given.truncate(record.len());
        self.records += 1;
        if self.records == 2 {
            self.hold()?;
        }
        Ok(object)
    }

    /// Makes [`Crossing::holders`] for the fields of the record given.
    fn hold(&mut self) -> rquickjs::Result<()> {
        for last in 0..self.given.len().min(HELD) {
            let holder = Object::new(self.ctx.clone())?;
            for (n, _) in &self.given[..=last] {
                let field = Property::from(Value::new_undefined(self.ctx.clone()))
                    .writable()
                    .enumerable()
                    .configurable();
                holder.prop(self.names[*n].1.clone(), field)?;
            }
            self.holders.push(holder);
        }
        Ok(())
    }

    /// The place in `names` of `key`, looked for at `guess` first; added when new.
    fn name(&mut self, key: &str, guess: Option<usize>) -> rquickjs::Result<usize> {
        if let Some(n) = guess.filter(|&n| self.names[n].0 == key) {
            return Ok(n);
        }
        if let Some(n) = self.names.iter().position(|(name, _)| name == key) {
            return Ok(n);
        }
        let atom = Atom::from_str(self.ctx.clone(), key)?;
        self.names.push((key.to_string(), atom));
        Ok(self.names.len() - 1)
    }

    /// The object `chosen` back as the record to store, `record` being the record last given
    /// by [`Crossing::give`]; `None` when `chosen` is not an object (a `toJSON` method may
    /// make it anything).
    pub fn back(
        &mut self,
        chosen: &Object<'js>,
        record: Map<String, Json>,
    ) -> Result<Option<Map<String, Json>>, BackError> {
        let method: Value = chosen.get(PredefinedAtom::ToJSON)?;
        if method.is_function() {
            return whole(&chosen.clone().into_value(), record);
        }
        self.read.clear();
        for prop in chosen.props::<Atom, Value>() {
            self.read.push(prop?);
        }
        let same_fields = self.read.len() == self.given.len()
            && self
                .read
                .iter()
                .zip(&self.given)
                .all(|((atom, _), (n, _))| *atom == self.names[*n].1);
        if same_fields {
            self.changed(record).map(Some)
        } else {
            self.rebuilt(&record).map(Some)
        }
    }

    /// `record` with the values read back in place of those given where they differ: the
    /// fields read are those of `record`, in its order.
    fn changed(&mut self, mut record: Map<String, Json>) -> Result<Map<String, Json>, BackError> {
        let mut gone = Vec::new();
        let read = self.read.drain(..);
        let fields = self.given.iter().zip(record.values_mut());
        for (i, ((_, now), ((_, was), old))) in read.zip(fields).enumerate() {
            if same(&now, was) {
                continue;
            }
            match values::back_at(&now, 1)? {
                Some(mut new) => {
                    values::keep_unchanged(&mut new, old);
                    *old = new;
                }
                None => gone.push(i),
            }
        }
        if !gone.is_empty() {
            let mut i = 0;
            record.retain(|_, _| {
                i += 1;
                !gone.contains(&(i - 1))
            });
        }
        Ok(record)
    }

    /// The properties read back as a new record, the numbers the hook left as they were in
    /// `record` keeping its digits.
    fn rebuilt(&mut self, record: &Map<String, Json>) -> Result<Map<String, Json>, BackError> {
        let mut map = Map::with_capacity(self.read.len());
        for (atom, value) in self.read.drain(..) {
            let Some(mut json) = values::back_at(&value, 1)? else {
                continue;
            };
            let key = match self.names.iter().find(|(_, a)| *a == atom) {
                Some((name, _)) => name.clone(),
                None => atom.to_string()?,
            };
            if let Some(before) = record.get(&key) {
                values::keep_unchanged(&mut json, before);
            }
            map.insert(key, json);
        }
        Ok(map)
    }
}

/// `value` read back whole, as [`values::from_js`] does, then the numbers left as they were
/// in `record` given their digits back; `None` when it is not an object.
fn whole(
    value: &Value<'_>,
    record: Map<String, Json>,
) -> Result<Option<Map<String, Json>>, BackError> {
    let Some(Json::Object(mut map)) = values::from_js(value)? else {
        return Ok(None);
    };
    for (key, value) in map.iter_mut() {
        if let Some(before) = record.get(key) {
            values::keep_unchanged(value, before);
        }
    }
    Ok(Some(map))
}

/// Whether `now` is the very value `was`, one a hook cannot change in place: the same
/// string, or the same number, boolean or null. A number that is not finite is never the
/// same, so that it comes back as `null` as [`values::from_js`] makes it.
fn same<'js>(now: &Value<'js>, was: &Value<'js>) -> bool {
    if now != was {
        return false;
    }
    match now.type_of() {
        Type::String | Type::Int | Type::Bool | Type::Null => true,
        Type::Float => now.as_float().is_some_and(f64::is_finite),
        _ => false,
    }
}
