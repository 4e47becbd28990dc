-- `TRUNCATE books` (or `TRUNCATE authors … CASCADE`) by a host fires no row or
-- INSERT/UPDATE/DELETE trigger: the counts and ranges kept the old values and the
-- version stood still, so cached pages and `meta.total` went on showing deleted books.
-- Statement-level AFTER TRUNCATE triggers reset the counts and bump the version, in the
-- truncating transaction. Every slot's version moves, so the sum does too.
CREATE FUNCTION books_truncated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE book_count SET n = 0, version = version + 1;
    DELETE FROM book_ranges;
    DELETE FROM book_groups;
    RETURN NULL;
END
$$;

ALTER FUNCTION books_truncated() SET search_path FROM CURRENT;

CREATE TRIGGER books_truncate AFTER TRUNCATE ON books
    FOR EACH STATEMENT EXECUTE FUNCTION books_truncated();
-- Authors' names show in pages and books (`include=author`).
CREATE TRIGGER authors_truncate AFTER TRUNCATE ON authors
    FOR EACH STATEMENT EXECUTE FUNCTION books_version_bumped();
