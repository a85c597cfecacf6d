-- A row of "bg_items" or "bg_results" may hold the "n" consecutive entries that start at its
-- "seq" (a block): written a chunk at a time, read a chunk at a time, so that a request of
-- 100,000 items is a hundred rows instead of a hundred thousand. A row with "n" = 1 holds its
-- one entry as it is; see src/storage/request_log.rs for the form of a block.
ALTER TABLE "bg_items" ADD COLUMN "n" INTEGER NOT NULL DEFAULT 1;
ALTER TABLE "bg_results" ADD COLUMN "n" INTEGER NOT NULL DEFAULT 1;
