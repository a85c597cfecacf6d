-- Live changes: every committed change of an entity's rows. A row is the objects "lo".."hi" of
-- "entity" created together (events "seq" .. "seq" + "hi" - "lo"), or the object "lo" (= "hi")
-- updated or deleted, with its stored row before the change ("before", the row as JSON).
-- Statement triggers on every entity table write the rows in the writing transaction, in
-- statement order ("lid"), without a number and without a NOTIFY (which would make commits
-- wait for each other); the sequencer (src/storage/live.rs), one at a time across every
-- server, numbers committed rows in "lid" order from "live_seq", so numbers follow commit
-- order for each object and a reader that has seen number n never meets a new row at or
-- below it.
CREATE TABLE IF NOT EXISTS "live_changes" (
  "lid" BIGSERIAL PRIMARY KEY,
  "seq" BIGINT,
  "entity" TEXT NOT NULL,
  "op" TEXT NOT NULL,
  "lo" BIGINT NOT NULL,
  "hi" BIGINT NOT NULL,
  "before" TEXT,
  "at" TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX IF NOT EXISTS "live_changes_seq" ON "live_changes" ("seq");
CREATE INDEX IF NOT EXISTS "live_changes_unnumbered" ON "live_changes" ("lid") WHERE "seq" IS NULL;
CREATE INDEX IF NOT EXISTS "live_changes_row" ON "live_changes" ("entity", "lo");
-- "kept_from": the first number still kept (older ones were pruned).
CREATE TABLE IF NOT EXISTS "live_seq" (
  "one" INTEGER PRIMARY KEY CHECK ("one" = 1),
  "next" BIGINT NOT NULL,
  "kept_from" BIGINT NOT NULL
);
INSERT INTO "live_seq" ("one", "next", "kept_from") VALUES (1, 1, 1) ON CONFLICT DO NOTHING;
CREATE OR REPLACE FUNCTION "entiserve_live_ins"() RETURNS trigger LANGUAGE plpgsql AS $f$
BEGIN
  INSERT INTO "live_changes" ("entity", "op", "lo", "hi")
  SELECT TG_TABLE_NAME, 'create', MIN("id"), MAX("id")
  FROM (SELECT "id", "id" - ROW_NUMBER() OVER (ORDER BY "id") AS "g" FROM "new_rows") s
  GROUP BY "g" ORDER BY MIN("id");
  RETURN NULL;
END $f$;
CREATE OR REPLACE FUNCTION "entiserve_live_upd"() RETURNS trigger LANGUAGE plpgsql AS $f$
BEGIN
  INSERT INTO "live_changes" ("entity", "op", "lo", "hi", "before")
  SELECT TG_TABLE_NAME, 'update', o."id", o."id", to_jsonb(o)::text FROM "old_rows" o ORDER BY o."id";
  RETURN NULL;
END $f$;
CREATE OR REPLACE FUNCTION "entiserve_live_del"() RETURNS trigger LANGUAGE plpgsql AS $f$
BEGIN
  INSERT INTO "live_changes" ("entity", "op", "lo", "hi", "before")
  SELECT TG_TABLE_NAME, 'delete', o."id", o."id", to_jsonb(o)::text FROM "old_rows" o ORDER BY o."id";
  RETURN NULL;
END $f$;
