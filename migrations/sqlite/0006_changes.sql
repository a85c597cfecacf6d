-- What each background request changed, so that it can be undone and listed (`changed_by`):
-- in the order applied, one row per range of ids created together, or per object updated or
-- deleted with the object as it was before ("before", the stored row as JSON).
CREATE TABLE IF NOT EXISTS "bg_changes" (
  "seq" INTEGER PRIMARY KEY AUTOINCREMENT,
  "rid" TEXT NOT NULL,
  "entity" TEXT NOT NULL,
  "op" TEXT NOT NULL,
  "lo" BIGINT NOT NULL,
  "hi" BIGINT NOT NULL,
  "before" TEXT
);
CREATE INDEX IF NOT EXISTS "bg_changes_rid" ON "bg_changes" ("rid", "entity", "op", "lo");
