-- Books per range of 1,024 ids, kept by statement-level triggers in the writing
-- transaction: a deep page finds its first id by a short prefix sum over the ranges
-- and skips fewer than 1,024 rows inside one, instead of walking every row before it.
CREATE TABLE book_ranges (
    bucket BIGINT PRIMARY KEY,
    n      BIGINT NOT NULL
);

INSERT INTO book_ranges (bucket, n) SELECT id >> 10, COUNT(*) FROM books GROUP BY 1;

CREATE FUNCTION books_ranges_added() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO book_ranges AS r (bucket, n)
        SELECT id >> 10, COUNT(*) FROM new_rows GROUP BY 1
        ON CONFLICT (bucket) DO UPDATE SET n = r.n + excluded.n;
    RETURN NULL;
END
$$;

CREATE FUNCTION books_ranges_removed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE book_ranges r SET n = r.n - d.c
        FROM (SELECT id >> 10 AS bucket, COUNT(*) AS c FROM old_rows GROUP BY 1) d
        WHERE r.bucket = d.bucket;
    RETURN NULL;
END
$$;

-- Only an UPDATE that moves ids between ranges changes a count (the API never does; a
-- host's SQL might): ordinary updates write nothing here.
CREATE FUNCTION books_ranges_moved() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO book_ranges AS r (bucket, n)
        SELECT bucket, SUM(delta) FROM (
            SELECT id >> 10 AS bucket, -1 AS delta FROM old_rows
            UNION ALL SELECT id >> 10, 1 FROM new_rows
        ) d GROUP BY bucket HAVING SUM(delta) <> 0
        ON CONFLICT (bucket) DO UPDATE SET n = r.n + excluded.n;
    RETURN NULL;
END
$$;

ALTER FUNCTION books_ranges_added() SET search_path FROM CURRENT;
ALTER FUNCTION books_ranges_removed() SET search_path FROM CURRENT;
ALTER FUNCTION books_ranges_moved() SET search_path FROM CURRENT;

CREATE TRIGGER books_ranges_insert AFTER INSERT ON books
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION books_ranges_added();
CREATE TRIGGER books_ranges_delete AFTER DELETE ON books
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION books_ranges_removed();
CREATE TRIGGER books_ranges_update AFTER UPDATE ON books
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION books_ranges_moved();
