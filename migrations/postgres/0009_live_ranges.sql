-- Live changes: the insert trigger reads the inserted ids once (smallest, largest, how many)
-- and, when they are one unbroken range (as a multi-row insert or an upload's chunk gives),
-- logs that range without sorting them; otherwise it groups them into ranges as before.
CREATE OR REPLACE FUNCTION "entiserve_live_ins"() RETURNS trigger LANGUAGE plpgsql AS $f$
DECLARE
  "first" BIGINT;
  "last" BIGINT;
  "n" BIGINT;
BEGIN
  SELECT MIN("id"), MAX("id"), COUNT(*) INTO "first", "last", "n" FROM "new_rows";
  IF "n" = 0 THEN
    RETURN NULL;
  END IF;
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
