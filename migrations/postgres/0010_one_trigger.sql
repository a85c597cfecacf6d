-- One statement trigger per event on every entity table, in place of two: "entiserve_ins" and
-- "entiserve_del" each record the row count's delta (src/storage/counts.rs) and log the change
-- for live changes (0008, 0009), "entiserve_upd" logs updates. Each trigger a statement fires
-- costs the database about as much again as a single-row insert, so the two that every insert
-- and delete fired are now one. The tables that have the earlier triggers get the new ones
-- here; tables made later get them when created (src/storage/pg_triggers.rs).
CREATE OR REPLACE FUNCTION "entiserve_ins"() RETURNS trigger LANGUAGE plpgsql AS $f$
DECLARE
  "first" BIGINT;
  "last" BIGINT;
  "n" BIGINT;
BEGIN
  SELECT MIN("id"), MAX("id"), COUNT(*) INTO "first", "last", "n" FROM "new_rows";
  IF "n" = 0 THEN
    RETURN NULL;
  END IF;
  INSERT INTO "entity_count_deltas" ("entity", "n") VALUES (TG_TABLE_NAME, "n");
  IF "last" - "first" + 1 = "n" THEN
    INSERT INTO "live_changes" ("entity", "op", "lo", "hi")
    VALUES (TG_TABLE_NAME, 'create', "first", "last");
  ELSE
    INSERT INTO "live_changes" ("entity", "op", "lo", "hi")
    SELECT TG_TABLE_NAME, 'create', MIN("id"), MAX("id")
    FROM (SELECT "id", "id" - ROW_NUMBER() OVER (ORDER BY "id") AS "g" FROM "new_rows") s
    GROUP BY "g" ORDER BY MIN("id");
  END IF;
  RETURN NULL;
END $f$;
CREATE OR REPLACE FUNCTION "entiserve_upd"() RETURNS trigger LANGUAGE plpgsql AS $f$
BEGIN
  INSERT INTO "live_changes" ("entity", "op", "lo", "hi", "before")
  SELECT TG_TABLE_NAME, 'update', o."id", o."id", to_jsonb(o)::text FROM "old_rows" o ORDER BY o."id";
  RETURN NULL;
END $f$;
CREATE OR REPLACE FUNCTION "entiserve_del"() RETURNS trigger LANGUAGE plpgsql AS $f$
DECLARE
  "n" BIGINT;
BEGIN
  INSERT INTO "live_changes" ("entity", "op", "lo", "hi", "before")
  SELECT TG_TABLE_NAME, 'delete', o."id", o."id", to_jsonb(o)::text FROM "old_rows" o ORDER BY o."id";
  GET DIAGNOSTICS "n" = ROW_COUNT;
  IF "n" > 0 THEN
    INSERT INTO "entity_count_deltas" ("entity", "n") VALUES (TG_TABLE_NAME, -"n");
  END IF;
  RETURN NULL;
END $f$;
DO $d$
DECLARE
  t regclass;
BEGIN
  FOR t IN SELECT DISTINCT tgrelid::regclass FROM pg_trigger WHERE tgname IN
    ('entiserve_live_ins', 'entiserve_live_upd', 'entiserve_live_del',
     'entiserve_count_ins', 'entiserve_count_del')
  LOOP
    EXECUTE format('DROP TRIGGER IF EXISTS "entiserve_live_ins" ON %s', t);
    EXECUTE format('DROP TRIGGER IF EXISTS "entiserve_live_upd" ON %s', t);
    EXECUTE format('DROP TRIGGER IF EXISTS "entiserve_live_del" ON %s', t);
    EXECUTE format('DROP TRIGGER IF EXISTS "entiserve_count_ins" ON %s', t);
    EXECUTE format('DROP TRIGGER IF EXISTS "entiserve_count_del" ON %s', t);
    EXECUTE format('CREATE TRIGGER "entiserve_ins" AFTER INSERT ON %s '
      'REFERENCING NEW TABLE AS "new_rows" FOR EACH STATEMENT EXECUTE FUNCTION "entiserve_ins"()', t);
    EXECUTE format('CREATE TRIGGER "entiserve_upd" AFTER UPDATE ON %s '
      'REFERENCING OLD TABLE AS "old_rows" FOR EACH STATEMENT EXECUTE FUNCTION "entiserve_upd"()', t);
    EXECUTE format('CREATE TRIGGER "entiserve_del" AFTER DELETE ON %s '
      'REFERENCING OLD TABLE AS "old_rows" FOR EACH STATEMENT EXECUTE FUNCTION "entiserve_del"()', t);
  END LOOP;
END $d$;
-- Fewer index entries per logged change: the index of numbers holds numbered rows only (a row
-- is logged unnumbered), and the index by object, which finds an object's later updates and
-- deletes, holds those only (most rows are created ranges).
DROP INDEX IF EXISTS "live_changes_seq";
CREATE UNIQUE INDEX "live_changes_seq" ON "live_changes" ("seq") WHERE "seq" IS NOT NULL;
DROP INDEX IF EXISTS "live_changes_row";
CREATE INDEX "live_changes_row" ON "live_changes" ("entity", "lo") WHERE "op" <> 'create';
DROP FUNCTION IF EXISTS "entiserve_live_ins"();
DROP FUNCTION IF EXISTS "entiserve_live_upd"();
DROP FUNCTION IF EXISTS "entiserve_live_del"();
DROP FUNCTION IF EXISTS "entiserve_count_ins"();
DROP FUNCTION IF EXISTS "entiserve_count_del"();
