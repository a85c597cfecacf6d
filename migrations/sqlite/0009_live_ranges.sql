-- Live changes: nothing changes on SQLite, whose writer logs its ranges itself (the
-- PostgreSQL side of this version changes its insert trigger). The version is recorded so both
-- backends stay at the same number.
SELECT 1;
