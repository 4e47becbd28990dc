-- Books per group of 32 ranges (32,768 ids), kept like the ranges: a deep page sums the
-- groups before its own, then the ranges of its group, so each prefix sum covers a few
-- dozen rows instead of one row per range.
CREATE TABLE book_groups (
    grp INTEGER PRIMARY KEY,
    n   INTEGER NOT NULL
);

INSERT INTO book_groups (grp, n) SELECT id >> 15, COUNT(*) FROM books GROUP BY id >> 15;

CREATE TRIGGER books_groups_insert AFTER INSERT ON books
BEGIN
    INSERT INTO book_groups (grp, n) VALUES (NEW.id >> 15, 1)
        ON CONFLICT (grp) DO UPDATE SET n = n + 1;
END;

CREATE TRIGGER books_groups_delete AFTER DELETE ON books
BEGIN
    UPDATE book_groups SET n = n - 1 WHERE grp = OLD.id >> 15;
END;

-- The API never changes an id; a host's own SQL might.
CREATE TRIGGER books_groups_move AFTER UPDATE OF id ON books
    WHEN OLD.id >> 15 != NEW.id >> 15
BEGIN
    UPDATE book_groups SET n = n - 1 WHERE grp = OLD.id >> 15;
    INSERT INTO book_groups (grp, n) VALUES (NEW.id >> 15, 1)
        ON CONFLICT (grp) DO UPDATE SET n = n + 1;
END;
