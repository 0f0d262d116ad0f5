-- depends: 0012_lexical_blocks
-- The members removed from this workspace (store_service/access/membership.py): every write transaction of
-- a member checks here, under the member's write lock, that it was not removed since its call was
-- authenticated; RemoveMember records the member here under that lock before sweeping.
CREATE TABLE removed_member (
    member_id uuid PRIMARY KEY,
    removed_at timestamptz NOT NULL DEFAULT now()
);
