-- The durable queue of background requests: the request, its items, each item's result, the
-- details log, and idempotency keys.
CREATE TABLE IF NOT EXISTS "bg_requests" (
    "id" INTEGER PRIMARY KEY AUTOINCREMENT,
    "rid" TEXT NOT NULL UNIQUE,
    "user_id" INTEGER NOT NULL,
    "name" TEXT NOT NULL,
    "kind" TEXT NOT NULL,
    "entity" TEXT NOT NULL DEFAULT '',
    "params" TEXT NOT NULL DEFAULT '{}',
    "status_id" INTEGER NOT NULL DEFAULT 2,
    "total" INTEGER NOT NULL DEFAULT 0,
    "done" INTEGER NOT NULL DEFAULT 0,
    "cursor" INTEGER NOT NULL DEFAULT 0,
    "progress" REAL NOT NULL DEFAULT 0,
    "http_status" INTEGER,
    "content_type" TEXT,
    "result" TEXT,
    "created_dt" TEXT NOT NULL,
    "finished_dt" TEXT,
    "locked_by" TEXT,
    "heartbeat_at" INTEGER,
    "attempts" INTEGER NOT NULL DEFAULT 0,
    "expired" INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS "bg_requests_open" ON "bg_requests" ("status_id", "id");
CREATE INDEX IF NOT EXISTS "bg_requests_user" ON "bg_requests" ("user_id", "id");

CREATE TABLE IF NOT EXISTS "bg_items" (
    "rid" TEXT NOT NULL,
    "seq" INTEGER NOT NULL,
    "item" TEXT NOT NULL,
    PRIMARY KEY ("rid", "seq")
);

CREATE TABLE IF NOT EXISTS "bg_results" (
    "rid" TEXT NOT NULL,
    "seq" INTEGER NOT NULL,
    "status" INTEGER NOT NULL,
    "body" TEXT NOT NULL,
    PRIMARY KEY ("rid", "seq")
);

CREATE TABLE IF NOT EXISTS "bg_details" (
    "id" INTEGER PRIMARY KEY AUTOINCREMENT,
    "rid" TEXT NOT NULL,
    "dt" TEXT NOT NULL,
    "details" TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS "bg_details_rid" ON "bg_details" ("rid", "id");

CREATE TABLE IF NOT EXISTS "idempotency_keys" (
    "user_id" INTEGER NOT NULL,
    "key" TEXT NOT NULL,
    "status" INTEGER NOT NULL,
    "body" TEXT NOT NULL,
    "content_type" TEXT NOT NULL,
    "created_at" INTEGER NOT NULL,
    PRIMARY KEY ("user_id", "key")
);
