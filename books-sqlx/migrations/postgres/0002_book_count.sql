-- The page envelope's total without COUNT(*) over every row: a counter kept by
-- statement-level triggers (one update per statement, however many rows it touched).
CREATE TABLE book_count (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    n  BIGINT  NOT NULL
);

INSERT INTO book_count (id, n) SELECT 1, COUNT(*) FROM books;

CREATE FUNCTION books_count_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE book_count SET n = n + (SELECT COUNT(*) FROM new_rows) WHERE id = 1;
    RETURN NULL;
END
$$;

CREATE FUNCTION books_count_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE book_count SET n = n - (SELECT COUNT(*) FROM old_rows) WHERE id = 1;
    RETURN NULL;
END
$$;

CREATE TRIGGER books_count_insert AFTER INSERT ON books
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION books_count_inserted();

CREATE TRIGGER books_count_delete AFTER DELETE ON books
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION books_count_deleted();
