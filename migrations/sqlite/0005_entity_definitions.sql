-- The entity definitions last applied to the tables (one row per entity), and every change
-- applied to them: when, by which server, the digest of the definitions, the steps.
CREATE TABLE IF NOT EXISTS "entity_definitions" (
  "name" TEXT PRIMARY KEY,
  "definition" TEXT NOT NULL,
  "digest" TEXT NOT NULL,
  "applied_dt" TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS "entity_changes" (
  "id" INTEGER PRIMARY KEY AUTOINCREMENT,
  "applied_dt" TEXT NOT NULL,
  "server" TEXT NOT NULL,
  "digest" TEXT NOT NULL,
  "steps" TEXT NOT NULL
);
