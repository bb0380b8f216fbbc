-- The Postgres migration of this number leaves free space in the requests table's pages for
-- in-place claim updates. SQLite has no such setting (it rewrites the row in its b-tree page
-- whatever the indexes); this migration only keeps the two histories numbered alike.
SELECT 1;
