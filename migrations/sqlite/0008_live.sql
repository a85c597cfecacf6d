-- Live changes: every committed change of an entity's rows, in commit order. A row is the
-- objects "lo".."hi" of "entity" created together (events "seq" .. "seq" + "hi" - "lo"), or the
-- object "lo" (= "hi") updated or deleted, with its stored row before the change ("before", the
-- row as JSON). The one writer numbers rows as its transaction commits; "live_seq" holds the
-- next number, so pruning old rows never reuses one. "at" is the commit time in seconds since
-- the epoch, for --changes-keep.
CREATE TABLE IF NOT EXISTS "live_changes" (
  "seq" INTEGER PRIMARY KEY,
  "entity" TEXT NOT NULL,
  "op" TEXT NOT NULL,
  "lo" BIGINT NOT NULL,
  "hi" BIGINT NOT NULL,
  "before" TEXT,
  "at" BIGINT NOT NULL
);
CREATE INDEX IF NOT EXISTS "live_changes_row" ON "live_changes" ("entity", "lo");
-- "kept_from": the first number still kept (older ones were pruned).
CREATE TABLE IF NOT EXISTS "live_seq" (
  "one" INTEGER PRIMARY KEY CHECK ("one" = 1),
  "next" BIGINT NOT NULL,
  "kept_from" BIGINT NOT NULL
);
INSERT INTO "live_seq" ("one", "next", "kept_from") VALUES (1, 1, 1) ON CONFLICT DO NOTHING;
