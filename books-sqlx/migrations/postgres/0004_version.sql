-- A version that changes with every committed write to books or authors, whoever makes
-- it (this process, another one, a host's own SQL): kept by statement-level triggers in
-- the writing transaction, in the counter's row, so readers get it in the same round
-- trip. The row lock orders the bumps as the commits.
ALTER TABLE book_count ADD COLUMN version BIGINT NOT NULL DEFAULT 0;

CREATE OR REPLACE FUNCTION books_count_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE book_count SET n = n + (SELECT COUNT(*) FROM new_rows), version = version + 1
        WHERE id = 1;
    RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION books_count_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE book_count SET n = n - (SELECT COUNT(*) FROM old_rows), version = version + 1
        WHERE id = 1;
    RETURN NULL;
END
$$;

CREATE FUNCTION books_version_bumped() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE book_count SET version = version + 1 WHERE id = 1;
    RETURN NULL;
END
$$;

ALTER FUNCTION books_count_inserted() SET search_path FROM CURRENT;
ALTER FUNCTION books_count_deleted() SET search_path FROM CURRENT;
ALTER FUNCTION books_version_bumped() SET search_path FROM CURRENT;

CREATE TRIGGER books_version_update AFTER UPDATE ON books
    FOR EACH STATEMENT EXECUTE FUNCTION books_version_bumped();
CREATE TRIGGER authors_version_write AFTER INSERT OR UPDATE OR DELETE ON authors
    FOR EACH STATEMENT EXECUTE FUNCTION books_version_bumped();
