-- The counter's trigger functions find book_count through the search_path the
-- migrations ran under (the store's schema), whatever the writing session's own.
ALTER FUNCTION books_count_inserted() SET search_path FROM CURRENT;
ALTER FUNCTION books_count_deleted() SET search_path FROM CURRENT;
