-- Users (the `users` entity adds its other fields to this table) and bearer tokens.
CREATE TABLE IF NOT EXISTS "users" (
    "id" INTEGER PRIMARY KEY AUTOINCREMENT,
    "login" TEXT NOT NULL,
    "password" TEXT,
    "role" TEXT NOT NULL DEFAULT 'user',
    "created_dt" TEXT NOT NULL,
    "updated_dt" TEXT NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS "users_login_key" ON "users" ("login");

CREATE TABLE IF NOT EXISTS "auth_tokens" (
    "token_hash" TEXT PRIMARY KEY,
    "user_id" INTEGER NOT NULL REFERENCES "users"("id") ON DELETE CASCADE,
    "created_dt" TEXT NOT NULL,
    "expires_dt" TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS "auth_tokens_user_id" ON "auth_tokens" ("user_id");
