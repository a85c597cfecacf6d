-- A token names the password hash and role it was issued under: a change of either ends it.
ALTER TABLE "auth_tokens" ADD COLUMN "tag" TEXT;
