-- A row of "bg_items" or "bg_results" may hold the "n" consecutive entries that start at its
-- "seq" (a block): written a chunk at a time, read a chunk at a time, so that a request of
-- 100,000 items is a hundred rows instead of a hundred thousand. A row with "n" = 1 holds its
-- one entry as it is; see src/storage/request_log.rs for the form of a block.
ALTER TABLE "bg_items" ADD COLUMN IF NOT EXISTS "n" BIGINT NOT NULL DEFAULT 1;
ALTER TABLE "bg_results" ADD COLUMN IF NOT EXISTS "n" BIGINT NOT NULL DEFAULT 1;
-- Blocks are read once and dropped: stored out of line without compressing them.
ALTER TABLE "bg_items" ALTER COLUMN "item" SET STORAGE EXTERNAL;
ALTER TABLE "bg_results" ALTER COLUMN "body" SET STORAGE EXTERNAL;
