-- A cancel asked for by the owner or an admin; the worker stops at its next chunk.
ALTER TABLE "bg_requests" ADD COLUMN "cancel_requested" INTEGER NOT NULL DEFAULT 0;
