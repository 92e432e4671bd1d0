-- An optional free-text note recorded with an operation (e.g. why a ratio was raised while
-- an alert fired): trimmed, 1..=500 characters, NULL when none. Existing rows get NULL.
ALTER TABLE ops ADD COLUMN note TEXT;
