-- The page envelope's total without COUNT(*) over every row: a counter kept by triggers.
CREATE TABLE book_count (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    n  INTEGER NOT NULL
);

INSERT INTO book_count (id, n) SELECT 1, COUNT(*) FROM books;

CREATE TRIGGER books_count_insert AFTER INSERT ON books
BEGIN
    UPDATE book_count SET n = n + 1 WHERE id = 1;
END;

CREATE TRIGGER books_count_delete AFTER DELETE ON books
BEGIN
    UPDATE book_count SET n = n - 1 WHERE id = 1;
END;
