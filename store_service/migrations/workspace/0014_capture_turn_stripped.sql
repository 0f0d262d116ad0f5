-- depends: 0013_removed_member
-- A captured memory's evidence is its span alone: the readers of a memory may read what it states,
-- not what its author said around it (store_service/intake/capture.py). The turn a Capture stored with its
-- memories is erased (set to NULL first, so no live row version keeps it) and its column dropped;
-- the spans stay. A Capture now keeps the whole turn in its author's history, which is owner-only.
UPDATE capture SET turn = NULL WHERE turn IS NOT NULL;
ALTER TABLE capture DROP COLUMN turn;
