// @ts-check
/// <reference path="entiserve.d.ts" />
// The hooks of campaigns (campaigns.yaml says `hooks: campaigns.js`): a campaign's name is
// stored without surrounding spaces and is never empty, and every change of a campaign leaves
// a row in `audit`. entiserve.d.ts, which `entiserve hook-types` writes, types them for editors.

/**
 * `name` without surrounding spaces; refuses a name that is empty then.
 * @param {string} name
 */
function trimmedName(name) {
  const trimmed = name.trim();
  if (trimmed === "") {
    throw new Refuse("name is empty", 422);
  }
  return trimmed;
}

/** @type {BeforeCreate<"campaigns">} */
function beforeCreate(record) {
  // A missing name, or one that is not text, is left to validation, which refuses it.
  if (typeof record.name === "string") {
    record.name = trimmedName(record.name);
  }
}

/** @type {BeforeUpdate<"campaigns">} */
function beforeUpdate(record) {
  if (typeof record.name === "string") {
    record.name = trimmedName(record.name);
  }
}

/**
 * Adds the audit row of a change of the campaign `id`, in the caller's name.
 * @param {Ctx} ctx
 * @param {number} id
 * @param {"create" | "update" | "delete"} action
 */
function audit(ctx, id, action) {
  ctx.create("audit", { entity: "campaigns", object_id: id, action, login: ctx.caller.login });
}

/** @type {AfterCreate<"campaigns">} */
function afterCreate(record, ctx) {
  audit(ctx, record.id, "create");
}

/** @type {AfterUpdate<"campaigns">} */
function afterUpdate(record, old, ctx) {
  audit(ctx, record.id, "update");
}

/** @type {AfterDelete<"campaigns">} */
function afterDelete(old, ctx) {
  audit(ctx, old.id, "delete");
}
