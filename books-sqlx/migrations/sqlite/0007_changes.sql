-- A second counter beside the version: `changes` moves with every write to books or
-- authors except inserts of books. The version check reads it with the total, the
-- greatest id and how many books lie above an id the caller names, so the API's cache
-- can tell a create (anyone's) from other writes and keep its full pages across it.
ALTER TABLE book_count ADD COLUMN changes INTEGER NOT NULL DEFAULT 0;

DROP TRIGGER books_count_delete;
CREATE TRIGGER books_count_delete AFTER DELETE ON books
BEGIN
    UPDATE book_count SET n = n - 1, version = version + 1, changes = changes + 1 WHERE id = 1;
END;

DROP TRIGGER books_version_update;
CREATE TRIGGER books_version_update AFTER UPDATE ON books
BEGIN
    UPDATE book_count SET version = version + 1, changes = changes + 1 WHERE id = 1;
END;

DROP TRIGGER authors_version_insert;
CREATE TRIGGER authors_version_insert AFTER INSERT ON authors
BEGIN
    UPDATE book_count SET version = version + 1, changes = changes + 1 WHERE id = 1;
END;

DROP TRIGGER authors_version_update;
CREATE TRIGGER authors_version_update AFTER UPDATE ON authors
BEGIN
    UPDATE book_count SET version = version + 1, changes = changes + 1 WHERE id = 1;
END;

DROP TRIGGER authors_version_delete;
CREATE TRIGGER authors_version_delete AFTER DELETE ON authors
BEGIN
    UPDATE book_count SET version = version + 1, changes = changes + 1 WHERE id = 1;
END;
