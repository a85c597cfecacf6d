-- One statement trigger per event: nothing changes on SQLite, whose writer counts and logs its
-- own changes (the PostgreSQL side of this version merges its triggers). The version is
-- recorded so both backends stay at the same number.
SELECT 1;
