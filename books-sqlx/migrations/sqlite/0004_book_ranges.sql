-- Books per range of 1,024 ids, kept by triggers in the writing transaction: a deep
-- page finds its first id by a short prefix sum over the ranges and skips fewer than
-- 1,024 rows inside one, instead of walking every row before it.
CREATE TABLE book_ranges (
    bucket INTEGER PRIMARY KEY,
    n      INTEGER NOT NULL
);

INSERT INTO book_ranges (bucket, n) SELECT id >> 10, COUNT(*) FROM books GROUP BY id >> 10;

CREATE TRIGGER books_ranges_insert AFTER INSERT ON books
BEGIN
    INSERT INTO book_ranges (bucket, n) VALUES (NEW.id >> 10, 1)
        ON CONFLICT (bucket) DO UPDATE SET n = n + 1;
END;

CREATE TRIGGER books_ranges_delete AFTER DELETE ON books
BEGIN
    UPDATE book_ranges SET n = n - 1 WHERE bucket = OLD.id >> 10;
END;

-- The API never changes an id; a host's own SQL might.
CREATE TRIGGER books_ranges_move AFTER UPDATE OF id ON books
    WHEN OLD.id >> 10 != NEW.id >> 10
BEGIN
    UPDATE book_ranges SET n = n - 1 WHERE bucket = OLD.id >> 10;
    INSERT INTO book_ranges (bucket, n) VALUES (NEW.id >> 10, 1)
        ON CONFLICT (bucket) DO UPDATE SET n = n + 1;
END;
